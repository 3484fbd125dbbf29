package huawei

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// pipeSession is a session whose OLT is a script the test plays.
func pipeSession(t *testing.T, olt func(r *bufio.Reader, w net.Conn)) *session {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	s := &session{host: "pipe", w: a, closer: a, prompt: "OLT(config)#", echoes: true, settle: 100 * time.Millisecond}
	s.startReader(a, nil)
	go olt(bufio.NewReader(b), b)
	return s
}

func TestExecEchoQuirks(t *testing.T) {
	const cmd = "service-port vlan 3000 gpon 0/1/0 ont 0 gemport 1 multi-service user-vlan 10 tag-transform translate"
	for _, c := range []struct {
		name  string
		reply func(line string) string
	}{
		{"echo wrapped inside a word", func(line string) string {
			return line[:55] + "\r\n" + line[55:] + "\r\n\r\nOLT(config)#"
		}},
		{"echo with cursor codes", func(line string) string {
			return line[:40] + "\x1b[1D\x1b[1C" + line[40:] + "\r\n\r\nOLT(config)#"
		}},
		{"prompt reprinted after an alarm before the echo", func(line string) string {
			return "\r\n  ! EVENT WARNING 2026-01-01 00:00:00+00:00\r\n  ALARM NAME :x\r\n\r\nOLT(config)#" + line + "\r\n\r\nOLT(config)#"
		}},
		{"no echo at all", func(line string) string { return "\r\nOLT(config)#" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := pipeSession(t, func(r *bufio.Reader, w net.Conn) {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				line = strings.TrimRight(line, "\r\n")
				out := c.reply(line)
				for len(out) > 0 { // in fragments, as a real OLT echoes
					n := min(len(out), 9)
					if _, err := w.Write([]byte(out[:n])); err != nil {
						return
					}
					out = out[n:]
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			out, err := s.exec(ctx, cmd)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(out) != "" {
				t.Errorf("output = %q, want none", out)
			}
			if s.mode() != "config" {
				t.Errorf("mode = %q", s.mode())
			}
		})
	}
}

// An echo arrives in fragments; one that ends in what looks like a paging
// prompt, a parameter prompt or a y/n question (free text in a
// description) is part of the command, not a question: nothing is
// answered before the echo is whole.
func TestEchoFragmentsAreNotQuestions(t *testing.T) {
	for _, text := range []string{"flat 7 (y/n)[n]:", "---- More ( Press 'Q' to break ) ----", "a { <cr>||<K> }:"} {
		t.Run(text, func(t *testing.T) {
			cmd := `ont modify 0 1 desc "` + text + `"`
			extra := make(chan string, 1)
			s := pipeSession(t, func(r *bufio.Reader, w net.Conn) {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				line = strings.TrimRight(line, "\r\n")
				cut := strings.Index(line, text) + len(text)
				w.Write([]byte(line[:cut]))
				// Whatever the client sends while it sees this fragment.
				got := make(chan string, 1)
				go func() {
					b := make([]byte, 64)
					n, _ := r.Read(b)
					got <- string(b[:n])
				}()
				select {
				case g := <-got:
					extra <- g
				case <-time.After(300 * time.Millisecond):
					extra <- ""
				}
				w.Write([]byte(line[cut:] + "\r\n\r\nOLT(config-if-gpon-0/1)#"))
			})
			// The production settle time: a question standing that long
			// would be answered all the same.
			s.settle = settleTime
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			out, err := s.exec(ctx, cmd)
			if err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("exec = %q, %v", out, err)
			}
			if g := <-extra; g != "" {
				t.Errorf("answered %q to a fragment of the echo", g)
			}
		})
	}
}
