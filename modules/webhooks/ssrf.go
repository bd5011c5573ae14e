package webhooks

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// errBlockedAddress marks a connection refused by the SSRF guard.
var errBlockedAddress = errors.New("target address is not a public address")

// nonPublicPrefixes are the ranges a webhook must not reach unless private targets are allowed:
// everything that is not globally routable unicast (RFC 6890 special-purpose registries).
var nonPublicPrefixes = mustPrefixes(
	// IPv4
	"0.0.0.0/8",       // "this network", unspecified
	"10.0.0.0/8",      // private
	"100.64.0.0/10",   // carrier-grade NAT
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local (cloud metadata lives here)
	"172.16.0.0/12",   // private
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // documentation
	"192.88.99.0/24",  // 6to4 relay anycast
	"192.168.0.0/16",  // private
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // documentation
	"203.0.113.0/24",  // documentation
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, broadcast included
	// IPv6
	"::/96",         // unspecified, loopback, deprecated IPv4-compatible
	"100::/64",      // discard
	"2001::/23",     // IETF protocol assignments (Teredo, ORCHID, …)
	"2001:db8::/32", // documentation
	"fc00::/7",      // unique local
	"fe80::/10",     // link-local
	"fec0::/10",     // deprecated site-local
	"ff00::/8",      // multicast
)

// Ranges that embed an IPv4 address, judged by that address.
var (
	mappedV4 = netip.MustParsePrefix("::ffff:0:0/96")
	nat64V4  = netip.MustParsePrefix("64:ff9b::/96")
	sixToV4  = netip.MustParsePrefix("2002::/16")
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// isPublicAddress reports whether ip is globally routable unicast. IPv6 forms that carry an IPv4
// address (mapped, NAT64, 6to4) are judged by the embedded address, so they cannot smuggle 127.0.0.1.
func isPublicAddress(ip netip.Addr) bool {
	if !ip.IsValid() || ip.Zone() != "" {
		return false
	}
	if ip.Is6() {
		switch {
		case mappedV4.Contains(ip):
			return isPublicAddress(ip.Unmap())
		case nat64V4.Contains(ip):
			b := ip.As16()
			return isPublicAddress(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToV4.Contains(ip):
			b := ip.As16()
			return isPublicAddress(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	for _, p := range nonPublicPrefixes {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// guardedDialer dials only public addresses. The check runs in Control, on the address actually
// being connected to after DNS resolution, so a name that resolves (or rebinds) to a private
// address is refused before any packet leaves.
func guardedDialer(timeout time.Duration, allowPrivate bool) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if allowPrivate {
		return d
	}
	d.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %q", errBlockedAddress, address)
		}
		if !isPublicAddress(ap.Addr()) {
			return fmt.Errorf("%w: %s", errBlockedAddress, ap.Addr())
		}
		return nil
	}
	return d
}
