package mongostore

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// OpenMonitored is Open with m receiving the client's command events and,
// when d is not nil, d dialling its connections: for tests that record
// what goes on the wire.
func OpenMonitored(ctx context.Context, uri string, o Options, m *event.CommandMonitor, d options.ContextDialer) (*Store, error) {
	return open(ctx, uri, o, func(c *options.ClientOptions) {
		c.SetMonitor(m)
		if d != nil {
			c.SetDialer(d)
		}
	})
}
