package doctor

import "time"

// SetBeforeProbe makes Deep call f as each probe starts, until restore is
// called: a test interrupts a run at a known command with it.
func SetBeforeProbe(f func(name string)) (restore func()) {
	beforeProbe = f
	return func() { beforeProbe = nil }
}

// HotQueryIndexes maps each explain row's check to the index that must
// serve its query, collection.name, marked "(not declared)" when baton
// does not declare it (Needed).
func HotQueryIndexes() map[string]string {
	out := map[string]string{}
	for _, q := range hotQueries(time.Now()) {
		name := q.collection + "." + q.index
		if len(neededIndex(q.collection, q.index).Keys) == 0 {
			name += " (not declared)"
		}
		out["explain "+q.name] = name
	}
	return out
}
