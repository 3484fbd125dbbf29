// Package driver holds the vendor-neutral contract between the router's OLT
// service and the code that speaks a vendor's command line: one method per
// operation of the API's Document 3, typed arguments and results whose JSON
// names are the ones the API returns, the errors the API maps to envelope
// codes, and the operation registry (read or write, default timeout,
// dry-run support).
//
// A vendor package (such as huawei) implements Driver; callers (the /olt
// API adapter, fibre services, plan sync) only see this package, so another
// vendor can be added without touching them.
package driver

import (
	"context"
)

// Driver is one OLT seen through its vendor's command line. Implementations
// serialise write operations per OLT and may run reads alongside them.
// Every method honours ctx (cancellation) and the timeout of its Options
// (or the registry default when zero).
//
// Operations with no arguments of their own take Options; the others take
// an Args struct that embeds Options.
type Driver interface {
	// Reading operations.
	Info(ctx context.Context, o Options) (*InfoResult, error)
	Autofind(ctx context.Context, o Options) (*AutofindResult, error)
	ONUs(ctx context.Context, a PortArgs) (*ONUsResult, error)
	VLANs(ctx context.Context, o Options) (*VLANsResult, error)
	ServicePorts(ctx context.Context, o Options) (*ServicePortsResult, error)
	Profiles(ctx context.Context, o Options) (*ProfilesResult, error)
	Config(ctx context.Context, o Options) (*ConfigResult, error)
	Run(ctx context.Context, a RunArgs) (*RunResult, error)
	Audit(ctx context.Context, a AuditArgs) (*AuditResult, error)
	Boards(ctx context.Context, o Options) (*BoardsResult, error)
	PONPorts(ctx context.Context, a PortArgs) (*PONPortsResult, error)
	PortOptical(ctx context.Context, a PortArgs) (*PortOpticalResult, error)
	Counters(ctx context.Context, a CountersArgs) (*CountersResult, error)
	ONTOptical(ctx context.Context, a ONTOpticalArgs) (*ONTOpticalResult, error)

	// Changing operations.
	Exec(ctx context.Context, a ExecArgs) (*ExecResult, error)
	VLANAdd(ctx context.Context, a VLANAddArgs) (*VLANResult, error)
	VLANDel(ctx context.Context, a VLANDelArgs) (*VLANResult, error)
	PortVLAN(ctx context.Context, a PortVLANArgs) (*PortVLANResult, error)
	ProfileAdd(ctx context.Context, a ProfileArgs) (*ProfileResult, error)
	ProfileDel(ctx context.Context, a ProfileArgs) (*ProfileResult, error)
	ONTAdd(ctx context.Context, a ONTAddArgs) (*ONTAddResult, error)
	ONTDel(ctx context.Context, a ONTRefArgs) (*ONTDelResult, error)
	ONTReboot(ctx context.Context, a ONTRefArgs) (*ONTRebootResult, error)
	ONTDesc(ctx context.Context, a ONTDescArgs) (*ONTDescResult, error)
	ONTActivate(ctx context.Context, a ONTRefArgs) (*ONTActiveResult, error)
	ONTDeactivate(ctx context.Context, a ONTRefArgs) (*ONTActiveResult, error)
	ONTReplan(ctx context.Context, a ONTReplanArgs) (*ONTReplanResult, error)
	NTP(ctx context.Context, a NTPArgs) (*WriteResult, error)
	Sysname(ctx context.Context, a SysnameArgs) (*WriteResult, error)
	Save(ctx context.Context, o Options) (*WriteResult, error)
	PlanSync(ctx context.Context, a PlanSyncArgs) (*PlanSyncResult, error)
	Init(ctx context.Context, a InitArgs) (*WriteResult, error)

	// Close logs out of the sessions the driver keeps open.
	Close() error
}

// Exchange is one command sent to the OLT and the reply it printed, kept
// verbatim (after telnet negotiation bytes are removed) so an operator can
// see exactly what the device said.
type Exchange struct {
	Sent  string `json:"sent"`
	Reply string `json:"reply"`
}

// Transcript collects every exchange of a call. The API returns it when the
// caller asks for `raw`, and errors carry it always.
type Transcript struct {
	Exchanges []Exchange `json:"exchanges"`
}

type transcriptKey struct{}

// WithTranscript returns a context that makes a driver append every
// exchange of the calls made with it to t. It exists so the raw option does
// not have to be threaded through every method signature.
func WithTranscript(ctx context.Context, t *Transcript) context.Context {
	return context.WithValue(ctx, transcriptKey{}, t)
}

// TranscriptFrom returns the transcript attached by WithTranscript, or nil.
func TranscriptFrom(ctx context.Context) *Transcript {
	t, _ := ctx.Value(transcriptKey{}).(*Transcript)
	return t
}
