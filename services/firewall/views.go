package firewall

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/google/nftables"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
)

// Rules answers GET /firewall: the MAC rules are the anti-spoofing
// bindings (MAC to addresses on an interface), each with its registered
// client; none until anti-spoofing binds them.
func (s *Service) Rules(ctx context.Context, in *api.FirewallViewRequest) (*api.FirewallView, error) {
	if in.Network != "" {
		if _, err := parseNetwork(in.Network); err != nil || !strings.Contains(in.Network, "/") {
			return nil, apierr.Invalid("network", "network must be an IPv4 CIDR")
		}
	}
	rules := s.macRules(ctx, in.Network)
	return &api.FirewallView{Count: len(rules), MACRules: rules}, nil
}

// Full answers GET /firewall/full: `nft -a list chain` of every chain on
// the forward hook in the target namespace (routerd's tables and the
// operator's alike: read, never changed), one line per string.
func (s *Service) Full(ctx context.Context, _ *api.None) (*api.FirewallFull, error) {
	c, err := nftables.New(nftables.WithNetNSFd(s.deps.NS.FD()))
	if err != nil {
		return nil, apierr.Internal(err.Error(), "cannot read the kernel's rules")
	}
	chains, err := c.ListChains()
	if err != nil {
		return nil, apierr.Internal(err.Error(), "cannot read the kernel's rules")
	}
	out := []string{}
	for _, ch := range chains {
		if ch.Hooknum == nil || *ch.Hooknum != *nftables.ChainHookForward || ch.Type == "" {
			continue
		}
		fam := familyName(ch.Table.Family)
		if fam == "" {
			continue
		}
		lines, err := s.nft(ctx, "-a", "list", "chain", fam, ch.Table.Name, ch.Name)
		if err != nil {
			return nil, apierr.Internal(err.Error(), "nft list chain %s %s %s failed", fam, ch.Table.Name, ch.Name)
		}
		out = append(out, lines...)
	}
	return &api.FirewallFull{ForwardChain: out}, nil
}

func familyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyBridge:
		return "bridge"
	case nftables.TableFamilyNetdev:
		return "netdev"
	case nftables.TableFamilyARP:
		return "arp"
	}
	return ""
}

// nft runs the nft command (for reading only) in the target namespace and
// returns its non-empty lines.
func (s *Service) nft(ctx context.Context, args ...string) ([]string, error) {
	var cmd *exec.Cmd
	if p := s.deps.NS.Path(); p != "" {
		cmd = exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + p, "nft"}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, "nft", args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}
