// Package httpapi holds what every baton HTTP surface shares: one JSON error
// shape ({"error":{"code","message","field"}}), a request-body limit, strict
// JSON decoding (Unmarshal: no duplicate keys, exact-case names), error
// messages that cut the input they echo (Sprintf, Quote, FieldPath), and
// bearer-token auth for local use.
//
// In the cloud, Cloud Run's IAM invoker check runs before a request reaches
// baton, so the bearer check here is only switched on when BATON_TOKEN is set
// (by `baton local`, or by an operator who wants a second factor).
package httpapi
