// Package cost prices what baton does with Google's published list prices,
// and prices the managed alternatives the same way, so `baton bench cost`
// can say what a run costs and what it would cost elsewhere.
//
// Every price is in this one file, each with the page it was read from
// and the date it was read. Prices are us-central1 (Tier 1) list prices
// in USD, before free tiers and discounts.
package cost
