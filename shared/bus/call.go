package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/apierr"
)

// DefaultTimeout bounds a request whose context has no deadline.
const DefaultTimeout = 30 * time.Second

// Call sends req to subject and waits for the reply. A subject nobody
// serves is a 503 naming the service, not a hang.
func Call(ctx context.Context, nc *nats.Conn, subject string, req *pb.Request) (*pb.Reply, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("bus: encode request: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	dl, _ := ctx.Deadline()
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(DeadlineHeader, strconv.FormatInt(dl.UnixMilli(), 10))
	resp, err := nc.RequestMsgWithContext(ctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, apierr.Unavailable("the service behind %s is not running", subject)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, apierr.Unavailable("the service behind %s did not answer in time", subject)
	case err != nil:
		return nil, fmt.Errorf("bus: request %s: %w", subject, err)
	}
	var rep pb.Reply
	if err := json.Unmarshal(resp.Data, &rep); err != nil {
		return nil, fmt.Errorf("bus: decode reply from %s: %w", subject, err)
	}
	return &rep, nil
}

// CallJSON calls subject and decodes a 2xx reply into out; any other
// status becomes an *apierr.Error carrying the service's message.
func CallJSON(ctx context.Context, nc *nats.Conn, subject string, req *pb.Request, out any) error {
	rep, err := Call(ctx, nc, subject, req)
	if err != nil {
		return err
	}
	if rep.Status >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(rep.Body, &e)
		return &apierr.Error{Status: rep.Status, Message: e.Error}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(rep.Body, out)
}
