// Package netns is the target network namespace a kernel-touching service
// works in. In production it is the host's namespace; in tests and in the
// lab it is one the test or the lab made. Every netlink handle, nftables
// connection and socket a service uses comes from here, never from
// package-level calls that act on whatever namespace the thread is in.
package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// NS is an open namespace.
type NS struct {
	path   string
	handle netns.NsHandle
}

// Open opens the namespace at path (e.g. /var/run/netns/lab-router, or
// /proc/<pid>/ns/net). An empty path means the namespace routerd runs in.
func Open(path string) (*NS, error) {
	var h netns.NsHandle
	var err error
	if path == "" {
		h, err = netns.Get()
	} else {
		h, err = netns.GetFromPath(path)
	}
	if err != nil {
		return nil, fmt.Errorf("netns: open %q: %w", path, err)
	}
	return &NS{path: path, handle: h}, nil
}

// Path is the path the namespace was opened from ("" for routerd's own).
func (n *NS) Path() string { return n.path }

// FD is the namespace's file descriptor.
func (n *NS) FD() int { return int(n.handle) }

// Netlink returns a netlink handle bound to the namespace. The caller
// closes it (Handle.Close).
func (n *NS) Netlink() (*netlink.Handle, error) {
	h, err := netlink.NewHandleAt(n.handle)
	if err != nil {
		return nil, fmt.Errorf("netns: netlink handle in %q: %w", n.path, err)
	}
	return h, nil
}

// NFTables returns an nftables connection bound to the namespace.
func (n *NS) NFTables() (*nftables.Conn, error) {
	c, err := nftables.New(nftables.WithNetNSFd(int(n.handle)))
	if err != nil {
		return nil, fmt.Errorf("netns: nftables in %q: %w", n.path, err)
	}
	return c, nil
}

// Do runs fn on an OS thread switched into the namespace, for opening
// sockets there: a socket stays in the namespace it was created in.
func (n *NS) Do(fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: current namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(n.handle); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: enter %q: %w", n.path, err)
	}
	ferr := fn()
	if err := leave(orig); err != nil {
		return errors.Join(ferr, err)
	}
	return ferr
}

// leave switches the locked thread back to orig and unlocks it. When that
// fails the thread stays locked, so the runtime ends it with the goroutine
// instead of reusing a thread that sits in the wrong namespace.
func leave(orig netns.NsHandle) error {
	if err := netns.Set(orig); err != nil {
		return fmt.Errorf("netns: cannot return to the original namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return nil
}

// Close releases the namespace handle.
func (n *NS) Close() error { return n.handle.Close() }

// New makes a fresh anonymous namespace (for tests and the lab's helpers):
// nothing is mounted under /var/run/netns, so nothing outlives the process.
// Close releases it.
func New() (*NS, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("netns: current namespace: %w", err)
	}
	defer orig.Close()
	h, err := netns.New() // unshare moves this thread into the new namespace
	if err != nil {
		_ = leave(orig)
		return nil, fmt.Errorf("netns: new namespace: %w", err)
	}
	if err := leave(orig); err != nil {
		h.Close()
		return nil, err
	}
	return &NS{path: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(h)), handle: h}, nil
}
