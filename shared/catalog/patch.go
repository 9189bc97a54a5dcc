package catalog

// MergePatch applies patch to doc with JSON merge-patch semantics (RFC 7396)
// and returns the result; doc is modified in place. An object in patch is
// merged key by key into the object in doc; null deletes a key (so the
// field goes back to its default); any other value replaces. Values are as
// encoding/json decodes them into any.
//
// It is exported because the CLI builds patches from flags with it, and the
// server applies them with it, so both agree on what a patch means.
func MergePatch(doc, patch map[string]any) map[string]any {
	if doc == nil {
		doc = map[string]any{}
	}
	for k, pv := range patch {
		if pv == nil {
			delete(doc, k)
			continue
		}
		if pm, ok := pv.(map[string]any); ok {
			dm, _ := doc[k].(map[string]any)
			doc[k] = MergePatch(dm, pm)
			continue
		}
		doc[k] = pv
	}
	return doc
}
