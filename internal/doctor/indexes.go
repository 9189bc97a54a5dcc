package doctor

import (
	"fmt"
	"strings"

	"github.com/baton-cron/baton/shared/store/mongostore"
)

// Needed are the indexes baton's queries need: the packages' own lists, so
// a new index in the code is checked without touching this package.
// tests/terraform_test.go holds infra/terraform/firestore.tf to the same
// lists.
func Needed() []mongostore.Index {
	return mongostore.Indexes()
}

// field is one key of an index, as Firestore and Terraform spell it.
type field struct {
	Path  string
	Order string // ASCENDING or DESCENDING
}

// fields turns an index's keys into Firestore fields; a direction other than
// 1 or -1 (which tests/terraform_test.go refuses) comes out as its value.
func fields(ix mongostore.Index) []field {
	out := make([]field, 0, len(ix.Keys))
	for _, k := range ix.Keys {
		out = append(out, field{Path: k.Key, Order: order(k.Value)})
	}
	return out
}

func order(v any) string {
	switch direction(v) {
	case 1:
		return "ASCENDING"
	case -1:
		return "DESCENDING"
	}
	return fmt.Sprint(v)
}

// direction reads an index key's direction whatever number type holds it
// (the code writes int, the driver reads int32 or double back).
func direction(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

// indexName is how a result names an index: collection, the code's name,
// and the keys, so the line can be matched to the code and to Terraform.
func indexName(ix mongostore.Index) string {
	return "index " + ix.Collection + "." + ix.Name
}

func keysText(ix mongostore.Index) string {
	return "(" + strings.Join(keyParts(ix), ", ") + ")"
}

// keyParts spells each key of ix as "path ORDER", the form both the
// report and firestore.tf's resource keys use.
func keyParts(ix mongostore.Index) []string {
	parts := make([]string, 0, len(ix.Keys))
	for _, f := range fields(ix) {
		parts = append(parts, f.Path+" "+f.Order)
	}
	return parts
}

// terraformAddress is the index's resource address in infra/terraform:
// firestore.tf keys google_firestore_index.baton by this string.
func terraformAddress(ix mongostore.Index) string {
	return fmt.Sprintf(`google_firestore_index.baton["%s(%s)"]`, ix.Collection, strings.Join(keyParts(ix), ","))
}

// createIndexFix is the Terraform step and the gcloud one that make a
// missing index, with the flags firestore.tf uses. The code's _id is given
// as __name__, as firestore.tf declares it by default (index_id_field); an
// index naming _id says how to use the other form where the API refuses it.
func createIndexFix(project, database string, ix mongostore.Index) string {
	var b strings.Builder
	fmt.Fprintf(&b, "terraform apply -target='%s' (infra/terraform), or: gcloud firestore indexes composite create --project=%s --database=%s --collection-group=%s --api-scope=mongodb-compatible-api --query-scope=collection-group --density=dense",
		terraformAddress(ix), project, database, ix.Collection)
	hasID := false
	for _, f := range fields(ix) {
		p := f.Path
		if p == idField {
			p, hasID = nameField, true
		}
		fmt.Fprintf(&b, " --field-config=field-path=%s,order=%s", p, strings.ToLower(f.Order))
	}
	if hasID {
		b.WriteString(` (if the API refuses field-path=__name__: terraform apply -var index_id_field=_id, or field-path=_id in the gcloud line)`)
	}
	return b.String()
}
