package sim

import (
	"bufio"
	"context"
	"io"
	"net"

	"golang.org/x/crypto/ssh"
)

// Telnet bytes the simulator uses.
const (
	iac  = 255
	will = 251
	wont = 252
	do   = 253
	dont = 254
	sb   = 250
	se   = 240
	echo = 1
	sga  = 3
)

// telnetReader strips the client's option negotiation from the input.
type telnetReader struct{ r *bufio.Reader }

func (t *telnetReader) ReadByte() (byte, error) {
	for {
		b, err := t.r.ReadByte()
		if err != nil || b != iac {
			return b, err
		}
		cmd, err := t.r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch cmd {
		case iac:
			return iac, nil
		case will, wont, do, dont:
			if _, err := t.r.ReadByte(); err != nil {
				return 0, err
			}
		case sb:
			for {
				x, err := t.r.ReadByte()
				if err != nil {
					return 0, err
				}
				if x == iac {
					if y, _ := t.r.ReadByte(); y == se {
						break
					}
				}
			}
		}
	}
}

func (o *OLT) serveTelnet(ctx context.Context, c net.Conn) {
	// The OLT echoes and suppresses go-ahead, as a Huawei does.
	if _, err := c.Write([]byte{iac, will, echo, iac, will, sga}); err != nil {
		return
	}
	in := &telnetReader{r: bufio.NewReader(c)}
	s := &session{olt: o, in: in, out: c}
	if !s.login() {
		return
	}
	s.run(ctx)
}

func (o *OLT) serveSSH(ctx context.Context, c net.Conn) {
	conn, chans, reqs, err := ssh.NewServerConn(c, o.sshConf)
	if err != nil {
		o.log.Debug("ssh handshake failed", "err", err)
		return
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			for r := range creqs {
				r.Reply(r.Type == "shell" || r.Type == "pty-req" || r.Type == "window-change", nil)
			}
		}()
		s := &session{olt: o, in: bufio.NewReader(ch), out: ch}
		s.banner()
		s.run(ctx)
		ch.Close()
		return
	}
}

type byteReader interface{ ReadByte() (byte, error) }

var _ io.ByteReader = (*telnetReader)(nil)
