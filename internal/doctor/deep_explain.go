package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// hotQuery is a query baton runs on every tick or claim, in the shape the
// store sends it (the method named), and the index that must serve it.
// They are explained on the real collections, where the indexes are (an
// index belongs to its collection group, and the scratch collections have
// none): explain plans the query and reads no document.
type hotQuery struct {
	name       string
	collection string
	filter     bson.D
	sort       bson.D
	limit      int64
	index      string // the name in mongostore.Indexes() that serves it
}

// hotQueries are the queries whose scan would grow with the data: the due
// page, a run history page, the sweeps and the GPU queue claim. Each
// filter and sort is copied from the method named (the store does not
// export them); TestDeepPassesOnAFitDatabase holds each to the index it
// names, which must be one of mongostore.Indexes(). The GPU claim is a findAndModify, which Firestore's Query
// Explain does not cover
// (https://cloud.google.com/firestore/mongodb-compatibility/docs/query-explain),
// so it is explained as the find of the same filter, sort and limit 1: the
// same plan.
func hotQueries(now time.Time) []hotQuery {
	lte := func(t time.Time) bson.D { return bson.D{{Key: "$lte", Value: t}} }
	return []hotQuery{
		{"due page (Schedules.DueInShard)", schedule.SchedulesCollection,
			bson.D{{Key: "vshard", Value: 0}, {Key: "enabled", Value: true}, {Key: "nextRunAt", Value: lte(now)}},
			bson.D{{Key: "nextRunAt", Value: 1}, {Key: "_id", Value: 1}}, 100, "due_vshard"},
		{"run history page (Catalog.ListRuns)", schedule.RunsCollection,
			bson.D{{Key: "scheduleId", Value: probeSchedule}},
			bson.D{{Key: "fireTime", Value: -1}, {Key: "_id", Value: -1}}, 50, "history"},
		{"failover sweep (Runs.Stale running)", schedule.RunsCollection,
			bson.D{{Key: "vshard", Value: 0}, {Key: "status", Value: schedule.RunRunning}, {Key: "sweepAt", Value: lte(now)}},
			bson.D{{Key: "sweepAt", Value: 1}}, 100, "sweep"},
		{"recovery sweep (Runs.Stale pending)", schedule.RunsCollection,
			bson.D{{Key: "vshard", Value: 0}, {Key: "status", Value: schedule.RunPending}, {Key: "sweepAt", Value: lte(now)}},
			bson.D{{Key: "sweepAt", Value: 1}}, 100, "sweep"},
		{"notification sweep (Runs.PendingNotices)", schedule.RunsCollection,
			bson.D{{Key: "notifyAt", Value: lte(now)}},
			bson.D{{Key: "notifyAt", Value: 1}}, 100, "notify"},
		{"misfire sweep (Schedules.Misfired)", schedule.SchedulesCollection,
			bson.D{{Key: "misfire", Value: true}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: ""}}}},
			bson.D{{Key: "misfire", Value: 1}, {Key: "_id", Value: 1}}, 100, "misfire"},
		{"GPU queue claim (GPU.ClaimBestJob)", mongostore.GPUJobsCollection,
			bson.D{{Key: "status", Value: gpumodel.StatusQueued}},
			bson.D{{Key: "priority", Value: -1}, {Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}, 1, "queue"},
		{"GPU lease sweep (GPU.Expired)", mongostore.GPUJobsCollection,
			bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{gpumodel.StatusDispatched, gpumodel.StatusRunning}}}}, {Key: "leaseUntil", Value: bson.D{{Key: "$lt", Value: now}}}},
			bson.D{{Key: "leaseUntil", Value: 1}, {Key: "_id", Value: 1}}, 100, "leases"},
	}
}

// Node names of a plan. Firestore's Query Explain names a full scan of a
// collection TableScan and a scan of an index IndexScan
// (https://cloud.google.com/firestore/mongodb-compatibility/docs/query-explain-reference);
// MongoDB's own servers say COLLSCAN and IXSCAN. The reply's envelope is
// not documented, so the names are looked for anywhere in it.
var (
	scanNodes  = []string{"TableScan", "COLLSCAN"}
	indexNodes = []string{"IndexScan", "LookupById", "TableAccess", "IXSCAN", "IDHACK", "EXPRESS_IXSCAN"}
)

// explains explains each hot query and fails the ones planned as a scan.
func (e *deepEnv) explains(ctx context.Context, r *Report) {
	for _, q := range hotQueries(e.now) {
		name := "explain " + q.name
		if ctx.Err() != nil {
			r.skip(name, "interrupted: "+ctx.Err().Error())
			continue
		}
		find := bson.D{{Key: "find", Value: q.collection}, {Key: "filter", Value: q.filter}}
		if q.sort != nil {
			find = append(find, bson.E{Key: "sort", Value: q.sort})
		}
		find = append(find, bson.E{Key: "limit", Value: q.limit})
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
		var reply bson.Raw
		// queryPlanner: plan only. Never executionStats, which runs the
		// query against production data.
		err := e.raw.RunCommand(qctx, bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&reply)
		cancel()
		shape := fmt.Sprintf("find %s %s sort %s", q.collection, compact(q.filter), compact(q.sort))
		if err != nil {
			said, _ := refusal(err)
			if said == "" {
				said = err.Error()
			}
			r.warn(name, "explain refused, so the plan is unknown: "+shape+": "+said,
				"run the query in the console's Query Explain tab and check it uses index "+q.collection+"."+q.index)
			continue
		}
		e.count(1, 0, 0) // Firestore bills an explain that does not run the query as one read
		text := reply.String()
		ix := neededIndex(q.collection, q.index)
		switch {
		case containsAny(text, scanNodes):
			r.fail(name, fmt.Sprintf("scans the whole collection (%s): %s; the plan names no index, want %s %s", firstOf(text, scanNodes), shape, q.collection+"."+q.index, keysText(ix)),
				indexFix(ix))
		case containsAny(text, indexNodes):
			r.pass(name, fmt.Sprintf("%s: %s", firstOf(text, indexNodes), indexOf(text, q.collection+"."+q.index)))
		default:
			r.warn(name, "the explain reply names neither an index scan nor a table scan: "+oneLine(text),
				"run the query in the console's Query Explain tab and check it uses index "+q.collection+"."+q.index)
		}
	}
}

// neededIndex is the index of mongostore.Indexes() named collection.name.
func neededIndex(collection, name string) mongostore.Index {
	for _, ix := range Needed() {
		if ix.Collection == collection && ix.Name == name {
			return ix
		}
	}
	return mongostore.Index{Collection: collection, Name: name}
}

// indexFix says how to create a missing index, in the cloud and locally.
func indexFix(ix mongostore.Index) string {
	return "create index " + ix.Collection + "." + ix.Name + " " + keysText(ix) + ": terraform apply -target='" + terraformAddress(ix) +
		"' (infra/terraform), then wait for it to be READY (baton doctor checks); locally, restart baton local (it creates every index), or mongosh \"$BATON_MONGO_URI\" --eval 'db." +
		ix.Collection + ".createIndex(" + mongoKeys(ix) + ", {name: \"" + ix.Name + "\"})'"
}

// indexOf quotes the index the plan names ("index: …", "indexName: …"), or
// the expected one when the reply does not say.
func indexOf(text, want string) string {
	for _, key := range []string{"index: ", `"index": "`, `"indexName": "`} {
		if i := strings.Index(text, key); i >= 0 {
			rest := text[i+len(key):]
			// The text ends at a quote, a newline, or a newline escaped in
			// extended JSON.
			for _, end := range []string{`"`, "\n", `\n`} {
				if j := strings.Index(rest, end); j >= 0 {
					rest = rest[:j]
				}
			}
			return strings.TrimSpace(rest)
		}
	}
	return "served by an index (want " + want + ")"
}

func containsAny(s string, subs []string) bool { return firstOf(s, subs) != "" }

func firstOf(s string, subs []string) string {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return x
		}
	}
	return ""
}

// compact prints a filter or sort as the report shows shapes: keys and
// operators, values elided where they are times.
func compact(d bson.D) string {
	if d == nil {
		return "{}"
	}
	raw, err := bson.MarshalExtJSON(d, false, false)
	if err != nil {
		return fmt.Sprint(d)
	}
	return string(raw)
}
