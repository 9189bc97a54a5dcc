// Package openapitest checks HTTP traffic against baton's OpenAPI contract
// (shared/openapi), so the contract cannot drift from the handlers. The
// end-to-end tests (tests/) install it on http.DefaultTransport: every
// request any client in the test process sends to a baton function (the
// tests' own calls, the console's, the GPU workers' callbacks) and every
// answer is validated with kin-openapi's openapi3filter.
//
// What counts as drift:
//   - a request to a route the contract does not have, answered with
//     anything but 404 (or 401, 405, 421, which come before routing);
//   - a method the path does not document, answered with anything but 405;
//   - a request the contract refuses that the server accepts (2xx or 5xx):
//     the contract is stricter than the code;
//   - a status the operation does not document;
//   - a response body that is not its schema: every response object is
//     additionalProperties: false, so an undocumented field fails;
//   - an error answer that is not the one error shape.
//
// A request the contract refuses and the server refuses too (a test of bad
// input) is not drift.
package openapitest
