package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/storage"
	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/logging"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// Exit codes of `baton lease run` besides the child's own.
const (
	exitLeaseHeld = 75 // EX_TEMPFAIL: held by someone else and --wait not set
	exitLeaseLost = 76 // the lease was lost while the command ran
)

// leaseFlags are shared by the lease subcommands.
type leaseFlags struct {
	bucket string
	prefix string
}

func (f *leaseFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.bucket, "bucket", "", "bucket holding the leases (default $"+config.EnvBucket+")")
	cmd.Flags().StringVar(&f.prefix, "prefix", "leases/", "object-name prefix of the leases")
}

// leaseConns is what a lease command opened: the storage client, and the
// store of the release markers when BATON_MONGO_URI is set.
type leaseConns struct {
	client *storage.Client
	st     *mongostore.Store
}

// Close closes both.
func (c leaseConns) Close() error {
	err := c.client.Close()
	if c.st != nil {
		err = errors.Join(err, c.st.Close(context.Background()))
	}
	return err
}

// manager opens a storage client the usual way: Application Default
// Credentials, or STORAGE_EMULATOR_HOST when set (the storage library reads
// it), and returns a lease manager plus what to close. With
// BATON_MONGO_URI set, the manager also reads and writes the release
// markers in the store (lease.Options.Markers), where the scheduler's
// releases write them: without it, a job lease the scheduler released
// would show as held (and lease run would wait for it) until its TTL ran
// out.
func (f *leaseFlags) manager(ctx context.Context, log *slog.Logger) (*lease.Manager, leaseConns, error) {
	bucket := f.bucket
	if bucket == "" {
		bucket = config.Get(config.EnvBucket)
	}
	if bucket == "" {
		return nil, leaseConns{}, usageError("lease: no bucket: set %s or pass --bucket", config.EnvBucket)
	}
	skew, err := config.Duration(config.EnvClockSkew)
	if err != nil {
		return nil, leaseConns{}, usageError("lease: %v", err)
	}
	jobStore, err := config.JobLeaseStore()
	if err != nil {
		return nil, leaseConns{}, usageError("lease: %v", err)
	}
	uri := config.Get(config.EnvMongoURI)
	if jobStore == config.JobLeaseStoreFirestore && uri == "" {
		return nil, leaseConns{}, usageError("lease: %s=%s keeps the job leases in Firestore: set %s", config.EnvJobLeaseStore, jobStore, config.EnvMongoURI)
	}
	c, err := storage.NewClient(ctx)
	if err != nil {
		return nil, leaseConns{}, fmt.Errorf("lease: storage client: %w", err)
	}
	conns := leaseConns{client: c}
	o := lease.Options{Skew: skew, Logger: log}
	var objects lease.ObjectStore
	if uri != "" {
		st, err := mongostore.Open(ctx, uri, mongostore.Options{Database: config.Get(config.EnvDatabase)})
		if err != nil {
			_ = c.Close()
			return nil, leaseConns{}, fmt.Errorf("lease: open the release markers' store: %w", err)
		}
		conns.st = st
		o.Markers = st.LeaseMarkers()
		objects = st.LeaseObjects()
	}
	// Job leases (job-…) and the decider shards' (tick-<v>) where
	// BATON_JOB_LEASE_STORE says, as the functions keep them; every other
	// name stays in the bucket.
	o.AlsoInJobLeases = scheduler.IsTickShardLease
	if o.JobLeases, o.OtherJobLeases, err = lease.JobLeaseStores(jobStore, c.Bucket(bucket), objects); err != nil {
		_ = c.Close()
		if conns.st != nil {
			_ = conns.st.Close(ctx)
		}
		return nil, leaseConns{}, usageError("lease: %v", err)
	}
	return lease.NewManager(c.Bucket(bucket), f.prefix, o), conns, nil
}

func leaseLogger(cmd *cobra.Command) *slog.Logger {
	return newLogger(cmd, config.Get(config.EnvLogLevel))
}

// leaseRunLogger is lease run's logger. Its stderr is the user's terminal,
// shared with CMD's own stderr, so without -v it logs only warnings and
// errors (a lost lease, a failed release, renews failing): what the user
// must see. BATON_LOG_LEVEL=error makes it quieter still. -v logs
// everything, debug included (acquire, release, signals).
func leaseRunLogger(cmd *cobra.Command, verbose bool) *slog.Logger {
	if verbose {
		return newLogger(cmd, "debug")
	}
	level := config.Get(config.EnvLogLevel)
	if logging.ParseLevel(level) < slog.LevelWarn {
		level = "warn"
	}
	return newLogger(cmd, level)
}

var leaseCmd = &cobra.Command{
	Use:   "lease",
	Short: "Run a command under a Cloud Storage lease (flock / consul lock for GCS), inspect or break leases",
	Long: `Leases are JSON objects PREFIX+NAME.json in $BATON_BUCKET, taken and renewed
with GCS generation preconditions. They work against real GCS (Application
Default Credentials) and against the emulator of 'baton local'
(STORAGE_EMULATOR_HOST), so two terminals or two machines can contend.`,
}

func init() {
	leaseCmd.AddCommand(newLeaseRunCmd(), newLeaseStatusCmd(), newLeaseBreakCmd())
	rootCmd.AddCommand(groupCommand(leaseCmd))
}

func newLeaseRunCmd() *cobra.Command {
	var (
		f       leaseFlags
		name    string
		ttl     time.Duration
		wait    bool
		grace   time.Duration
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "run --name NAME [--ttl 15s] [--wait] [--grace 10s] -- CMD [ARGS...]",
		Short: "Run a command only while holding the lease, heartbeating meanwhile",
		Long: `Take the lease NAME, run CMD while holding it, and release it when CMD exits.
The lease is renewed every ttl/3 (at most once a second). If it is lost (a
renew is refused because someone else took or broke it, or renews failed for
the whole trust window), CMD's process group gets SIGTERM, then SIGKILL after
--grace, and baton exits 76. CMD gets BATON_LEASE_NAME and BATON_LEASE_EPOCH
(the fencing token) in its environment.

Exit status: CMD's own (128+signal if it died of a signal); 75 when the lease
is held by someone else and --wait is not set; 76 when the lease was lost
while CMD ran; 2 for bad usage.

baton itself writes nothing on stdout, and on stderr only warnings and
errors (a lost lease, a failed release, failing renews), so CMD's output
reads as if it ran alone; -v adds everything else (lease acquired, epoch,
released, signals).`,
		Example: `  baton lease run --name nightly-backup -- ./backup.sh
  baton lease run --name report --ttl 30s --wait -- make report`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return usageError("lease run: --name is required")
			}
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return usageError("lease run: give the command after --, as in: baton lease run --name %s -- CMD ARGS", name)
			}
			if grace <= 0 {
				return usageError("lease run: --grace %s: want a positive duration", grace)
			}
			log := leaseRunLogger(cmd, verbose)
			ctx := cmd.Context()
			m, client, err := f.manager(ctx, log)
			if err != nil {
				return err
			}
			defer client.Close()
			return runUnderLease(ctx, cmd, log, m, name, ttl, wait, grace, args)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&name, "name", "", "lease name (required)")
	cmd.Flags().DurationVar(&ttl, "ttl", 15*time.Second, "lease ttl; renewed every ttl/3, at most once a second")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the lease instead of exiting 75 when it is held")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when the lease is lost")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log everything (acquire, epoch, release), not only warnings and errors")
	return cmd
}

func runUnderLease(ctx context.Context, cmd *cobra.Command, log *slog.Logger, m *lease.Manager, name string, ttl time.Duration, wait bool, grace time.Duration, args []string) error {
	var l *lease.Lease
	var err error
	if wait {
		l, err = m.AcquireWait(ctx, name, ttl)
	} else {
		l, err = m.Acquire(ctx, name, ttl)
	}
	var held *lease.HeldError
	switch {
	case errors.As(err, &held):
		fmt.Fprintf(cmd.ErrOrStderr(), "baton: %v\n", held)
		return &exitError{code: exitLeaseHeld}
	case errors.Is(err, lease.ErrBadTTL):
		return usageError("lease run: %v", err)
	case err != nil:
		return err
	}
	log.Info("lease acquired", "lease", name, "holder", l.Holder(), "epoch", l.Epoch(), "ttl", ttl.String())

	child := exec.Command(args[0], args[1:]...) //nolint:gosec // G204: running the operator's own command under the lease is what lease run is for
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
	child.Env = append(os.Environ(),
		"BATON_LEASE_NAME="+name,
		"BATON_LEASE_EPOCH="+strconv.FormatInt(l.Epoch(), 10))
	// Its own process group, so a lost lease stops the whole command
	// (sh -c pipelines included), not just its first process.
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		_ = l.Release(context.WithoutCancel(ctx))
		return fmt.Errorf("lease run: start %s: %w", args[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	var werr error
	lost := false
	select {
	case werr = <-exited:
	case <-l.Done():
		lost = true
		log.Error("lease lost; stopping the command", "lease", name, "epoch", l.Epoch(), "err", l.Err(), "pid", child.Process.Pid)
		werr = stopChild(child, exited, grace, log)
	case <-ctx.Done():
		log.Info("signal received; stopping the command", "lease", name, "pid", child.Process.Pid)
		werr = stopChild(child, exited, grace, log)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
	defer cancel()
	if rerr := l.Release(rctx); rerr != nil {
		if errors.Is(rerr, lease.ErrLost) {
			lost = true
		} else {
			log.Warn("lease release failed; it will expire", "lease", name, "err", rerr)
		}
	}
	if lost {
		return &exitError{code: exitLeaseLost, err: fmt.Errorf("lease %q lost while the command ran: %w", name, l.Err())}
	}
	return childExit(werr)
}

// stopChild sends SIGTERM to the child's process group, then SIGKILL after
// grace, and returns the child's wait error.
func stopChild(child *exec.Cmd, exited <-chan error, grace time.Duration, log *slog.Logger) error {
	pgid := -child.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-exited:
		return err
	case <-t.C:
		log.Warn("command ignored SIGTERM; sending SIGKILL", "pid", child.Process.Pid, "grace", grace.String())
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		return <-exited
	}
}

// childExit maps the child's wait error to baton's exit: the child's own
// code, or 128+signal.
func childExit(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return fmt.Errorf("lease run: wait: %w", err)
	}
	code := ee.ExitCode()
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return &exitError{code: code}
}

func newLeaseStatusCmd() *cobra.Command {
	var (
		f     leaseFlags
		name  string
		out   *outputFormat
		watch *watchFlags
	)
	cmd := &cobra.Command{
		Use:   "status [--name NAME]",
		Short: "Show holder, epoch, age and time left of one lease or all of them",
		Long: `Show leases: holder, fencing epoch, age (since the holder acquired it, by the
holder's clock) and time left (server Updated + ttl + $BATON_CLOCK_SKEW, minus
now). A released or broken lease shows as free, with its last epoch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			m, client, err := f.manager(ctx, leaseLogger(cmd))
			if err != nil {
				return err
			}
			defer client.Close()
			if watch.on {
				return runWatch(ctx, cmd, watch, out, watchSpec[leaseWatchRow]{
					fetch: func(ctx context.Context) ([]leaseWatchRow, error) {
						infos, err := leaseInfos(ctx, m, name)
						now := time.Now()
						rows := make([]leaseWatchRow, 0, len(infos))
						for _, i := range infos {
							rows = append(rows, leaseWatchRow{newLeaseView(i, now), i, now})
						}
						return rows, err
					},
					key: func(r leaseWatchRow) string { return r.Name },
					// Not the renewals (generation, time left): a held
					// lease would print at every heartbeat.
					version: func(r leaseWatchRow) string { return fmt.Sprint(r.State, r.Holder, r.Epoch) },
					header:  leaseHeader,
					row:     func(r leaseWatchRow) string { return leaseRow(&r.info, r.now) },
				})
			}
			infos, err := leaseInfos(ctx, m, name)
			if err != nil {
				return err
			}
			now := time.Now()
			views := make([]leaseView, 0, len(infos))
			for _, i := range infos {
				views = append(views, newLeaseView(i, now))
			}
			return out.print(cmd.OutOrStdout(), leaseList{Leases: views}, func() error {
				printLeases(cmd, infos, now)
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&name, "name", "", "lease name (default: all leases under the prefix)")
	out = addOutput(cmd, `{"leases":[…]}`)
	watch = addWatch(cmd, `Each poll reads the one lease of --name, or lists the leases under
--prefix (one object listing, which grows with the number of leases).`)
	return cmd
}

// leaseInfos reads the lease name, or all leases under the prefix when
// name is empty. A lease never taken shows as free.
func leaseInfos(ctx context.Context, m *lease.Manager, name string) ([]lease.Info, error) {
	if name == "" {
		return m.List(ctx)
	}
	i, err := m.Status(ctx, name)
	switch {
	case i != nil:
		return []lease.Info{*i}, nil
	case errors.Is(err, lease.ErrNotFound):
		return []lease.Info{{Name: name, Free: true}}, nil
	}
	return nil, err
}

// leaseWatchRow is one lease as lease status --watch prints it: its view
// (the JSON and YAML), and the lease and the time it was read at (the
// table's age and time left).
type leaseWatchRow struct {
	leaseView
	info lease.Info
	now  time.Time
}

// leaseList is the document of lease status -o json|yaml.
type leaseList struct {
	Leases []leaseView `json:"leases"`
}

// leaseView is one lease as lease status -o json|yaml prints it: the
// lease's fields, and its state (held, expired or free) judged at one now.
type leaseView struct {
	Name       string     `json:"name"`
	Object     string     `json:"object,omitempty"`
	State      string     `json:"state"`
	Holder     string     `json:"holder,omitempty"`
	Epoch      int64      `json:"epoch"`
	TTL        string     `json:"ttl,omitempty"`
	AcquiredAt *time.Time `json:"acquiredAt,omitempty"`
	RenewedAt  *time.Time `json:"renewedAt,omitempty"`
	Updated    *time.Time `json:"updated,omitempty"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	Generation int64      `json:"generation,omitempty"`
}

func newLeaseView(i lease.Info, now time.Time) leaseView {
	t := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		u := t.UTC()
		return &u
	}
	v := leaseView{
		Name: i.Name, Object: i.Object, State: leaseState(&i, now), Holder: i.Holder, Epoch: i.Epoch,
		AcquiredAt: t(i.AcquiredAt), RenewedAt: t(i.RenewedAt), Updated: t(i.Updated), ExpiresAt: t(i.ExpiresAt),
		Generation: i.Generation,
	}
	if i.TTL > 0 {
		v.TTL = i.TTL.String()
	}
	if i.Free {
		v.Holder = ""
	}
	return v
}

// leaseState is held, expired or free.
func leaseState(i *lease.Info, now time.Time) string {
	switch {
	case i.Free:
		return "free"
	case !i.Live(now):
		return "expired"
	}
	return "held"
}

func printLeases(cmd *cobra.Command, infos []lease.Info, now time.Time) {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, leaseHeader)
	for _, i := range infos {
		fmt.Fprintln(tw, leaseRow(&i, now))
	}
	_ = tw.Flush()
}

// leaseHeader and leaseRow are the table of lease status (and of its
// --watch).
const leaseHeader = "NAME\tHOLDER\tEPOCH\tAGE\tLEFT\tSTATE"

func leaseRow(i *lease.Info, now time.Time) string {
	state, holder, age, left := leaseState(i, now), i.Holder, "-", "-"
	if i.Free {
		holder = "-"
	}
	if !i.Free && !i.AcquiredAt.IsZero() {
		age = now.Sub(i.AcquiredAt).Round(time.Second).String()
	}
	if state == "held" {
		left = i.ExpiresAt.Sub(now).Round(100 * time.Millisecond).String()
	}
	return fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%s", i.Name, holder, i.Epoch, age, left, state)
}

func newLeaseBreakCmd() *cobra.Command {
	var (
		f    leaseFlags
		name string
		yes  bool
	)
	cmd := &cobra.Command{
		Use:   "break --name NAME --yes",
		Short: "Free a lease whoever holds it (operators only)",
		Long: `Free the lease NAME, keeping its epoch: the next holder gets epoch+1 and the
current holder's next renew is refused, so it stops its work (and its fenced
writes are refused). Needs --yes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usageError("lease break: --name is required")
			}
			if !yes {
				return usageError("lease break: breaking %q stops its holder; pass --yes to confirm", name)
			}
			ctx := cmd.Context()
			m, client, err := f.manager(ctx, leaseLogger(cmd))
			if err != nil {
				return err
			}
			defer client.Close()
			if err := m.Break(ctx, name); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lease %s broken\n", name)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&name, "name", "", "lease name (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm")
	return cmd
}
