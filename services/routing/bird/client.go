// Package bird runs BIRD 2 and talks to it over its control socket: the
// daemon process (in the target network namespace), configuration checks
// and reloads, and the parsers of `show protocols all` and friends.
package bird

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Line is one line of a reply: its code (the last one given, for the
// continuation lines that carry none) and its text.
type Line struct {
	Code int
	Text string
}

// Error is a reply whose final code is an error (8xxx run-time, 9xxx
// parse).
type Error struct {
	Code int
	Text string
}

func (e *Error) Error() string { return fmt.Sprintf("bird: %s (%04d)", e.Text, e.Code) }

// Cmd sends one command on the control socket at path and returns the
// reply's lines. The protocol: a greeting `0001 BIRD x ready.`, then per
// command lines `dddd-text` (more follow), ` text` (continuation of the
// previous code) and `dddd text` (the last).
func Cmd(ctx context.Context, path, cmd string) ([]Line, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(10 * time.Second)
	}
	_ = c.SetDeadline(dl)
	r := bufio.NewReaderSize(c, 64<<10)
	if _, err := readReply(r); err != nil {
		return nil, fmt.Errorf("bird: greeting: %w", err)
	}
	if _, err := c.Write([]byte(cmd + "\n")); err != nil {
		return nil, err
	}
	return readReply(r)
}

func readReply(r *bufio.Reader) ([]Line, error) {
	var out []Line
	code := 0
	for {
		s, err := r.ReadString('\n')
		if err != nil {
			return out, err
		}
		s = strings.TrimRight(s, "\n")
		if strings.HasPrefix(s, " ") || len(s) < 5 {
			out = append(out, Line{code, strings.TrimPrefix(s, " ")})
			continue
		}
		n, err := strconv.Atoi(s[:4])
		if err != nil {
			out = append(out, Line{code, s})
			continue
		}
		code = n
		out = append(out, Line{code, s[5:]})
		if s[4] == ' ' {
			if code >= 8000 {
				return out, &Error{code, s[5:]}
			}
			return out, nil
		}
	}
}
