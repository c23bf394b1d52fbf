package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
)

// Defaults of the proxy mode's flags.
const (
	DefaultUserHeader   = "X-Forwarded-User"
	DefaultGroupsHeader = "X-Forwarded-Groups"
	DefaultProxyCIDRs   = "127.0.0.1/32,::1/128"
	// SecretHeader carries the shared secret of --auth-proxy-secret-file.
	SecretHeader = "X-Proxy-Secret"
)

// Errors of Proxy.Authenticate; both answer 401.
var (
	ErrUntrustedProxy = errors.New("the request did not come from the trusted authenticating proxy")
	ErrNoUser         = errors.New("the authenticating proxy named no user")
	// ErrRepeatedGroups is a request with more than one groups header: a
	// proxy that appends to (rather than overwrites) the client's header would
	// let the client add groups.
	ErrRepeatedGroups = errors.New("the request carries the groups header more than once")
	// ErrForeignHost is a request from the proxy's address addressed to a
	// name that is not the proxy's (Proxy.Hosts): DNS rebinding, or a
	// port-forward that skips the proxy. It answers 421.
	ErrForeignHost = errors.New("the request is addressed to a name the authenticating proxy does not forward for")
)

// Proxy trusts an authenticating proxy's user and groups headers.
type Proxy struct {
	UserHeader   string
	GroupsHeader string
	// Trusted are the proxy's source addresses; requests from them need no
	// secret.
	Trusted []netip.Prefix
	// Secret, when not empty, is also accepted in SecretHeader from any address.
	Secret []byte
	// Hosts are the names the proxy forwards requests for (its public
	// names, as in the Host header). A request trusted by its address must
	// be addressed to one of them or to a loopback name: a page that DNS
	// rebinding or a port-forward brings to the console's port names its
	// own host, and would otherwise be trusted (Middleware).
	Hosts []string
}

// Trusts reports whether r comes from the proxy: from a trusted address (the
// TCP peer, never X-Forwarded-For), or carrying the shared secret.
func (p Proxy) Trusts(r *http.Request) bool { return p.fromAddress(r) || p.withSecret(r) }

// fromAddress: r's TCP peer is a trusted address.
func (p Proxy) fromAddress(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && containsAddr(p.Trusted, ap.Addr())
}

// withSecret: r carries the shared secret, once.
func (p Proxy) withSecret(r *http.Request) bool {
	if len(p.Secret) == 0 {
		return false
	}
	got := r.Header.Values(SecretHeader)
	if len(got) != 1 {
		return false
	}
	// Compare digests, so neither the content nor the length leaks by timing.
	a, b := sha256.Sum256([]byte(got[0])), sha256.Sum256(p.Secret)
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// addressedToIt: host (a Host header) is one of Hosts or a loopback name.
func (p Proxy) addressedToIt(host string) bool {
	if LoopbackHost(host) {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	for _, name := range p.Hosts {
		if strings.EqualFold(host, name) {
			return true
		}
	}
	return false
}

// foreignHostWords say why a request addressed to another name is refused.
func (p Proxy) foreignHostWords() string {
	names := "a loopback name"
	if len(p.Hosts) > 0 {
		names = strings.Join(p.Hosts, ", ") + " or " + names
	}
	return "This console takes its authenticating proxy's word only for requests addressed to " + names +
		": a page that reached its port under another name could claim to be anyone. If this name is the console's, add it to --auth-proxy-hosts."
}

// Authenticate reads the user the proxy names. Groups that Kubernetes
// reserves ("system:…", e.g. system:masters) are dropped: a proxy's identity
// provider never grants them, and impersonating them would bypass RBAC.
func (p Proxy) Authenticate(r *http.Request) (User, error) {
	switch {
	case p.withSecret(r):
	case !p.fromAddress(r):
		return User{}, ErrUntrustedProxy
	case !p.addressedToIt(r.Host):
		return User{}, ErrForeignHost
	}
	names := r.Header.Values(p.UserHeader)
	if len(names) != 1 || strings.TrimSpace(names[0]) == "" {
		// None, or several (one of them perhaps sent by the client): refuse.
		return User{}, ErrNoUser
	}
	groups := r.Header.Values(p.GroupsHeader)
	if len(groups) > 1 {
		return User{}, ErrRepeatedGroups
	}
	u := User{Name: strings.TrimSpace(names[0])}
	for _, g := range SplitGroups(groups...) {
		if !strings.HasPrefix(g, "system:") {
			u.Groups = append(u.Groups, g)
		}
	}
	if strings.HasPrefix(u.Name, "system:") {
		return User{}, fmt.Errorf("%w: %q is a Kubernetes system name", ErrNoUser, u.Name)
	}
	return u, nil
}

// ParseCIDRs reads --auth-proxy-cidrs: comma-separated prefixes or single
// addresses. An empty string trusts no address (then only the secret counts).
func ParseCIDRs(s string) ([]netip.Prefix, error) { return parsePrefixes("--auth-proxy-cidrs", s) }

// ParseHosts reads --auth-proxy-hosts: comma-separated host names, a port
// after one ignored.
func ParseHosts(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		name := strings.TrimSpace(part)
		if h, _, err := net.SplitHostPort(name); err == nil && !strings.ContainsAny(name, "/@") {
			name = h
		}
		if ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")); ip != nil {
			name = ip.String()
		}
		switch {
		case name == "":
			continue
		case strings.ContainsAny(name, "/@ *") || strings.Contains(name, ":") && net.ParseIP(name) == nil:
			return nil, fmt.Errorf("--auth-proxy-hosts: %q is not a host name (give names such as quota.example.com, no scheme, path or wildcard)", strings.TrimSpace(part))
		}
		out = append(out, strings.ToLower(name))
	}
	return out, nil
}

// ParseTrustedProxies reads --trusted-proxy-cidrs, as ParseCIDRs.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	return parsePrefixes("--trusted-proxy-cidrs", s)
}

func parsePrefixes(flag, s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is neither an address nor a CIDR", flag, part)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %v", flag, part, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// MinSecretLength is the shortest shared secret the console accepts.
const MinSecretLength = 16

// ReadSecret reads --auth-proxy-secret-file; surrounding white space (a
// trailing newline) is not part of the secret.
func ReadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--auth-proxy-secret-file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < MinSecretLength {
		return nil, fmt.Errorf("--auth-proxy-secret-file: the secret in %s is shorter than %d characters", path, MinSecretLength)
	}
	return []byte(s), nil
}
