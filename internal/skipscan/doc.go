// Package skipscan is the baseline baton's benchmarks measure keyset
// paging against: lists read with skip/limit, which Firestore bills for
// every document skipped as well as every document returned, so that page
// n costs n pages of reads. baton itself never pages this way (the store's
// lists are keyset-paged); the package lives under internal/ and outside
// the store so that nothing in production can.
package skipscan
