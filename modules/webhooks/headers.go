package webhooks

import (
	"fmt"
	"net/textproto"
	"sort"
	"strings"
)

// Limits on a subscription's custom headers.
const (
	maxCustomHeaders     = 10
	maxCustomHeaderBytes = 4096 // names and values together
)

// refusedHeaders are headers a subscription may not set: hop-by-hop ones, those the sender owns, and
// the webhook-* namespace of the signature.
var refusedHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true, "Content-Type": true,
}

// redactedValue replaces every custom header value in responses: they often carry credentials.
const redactedValue = "[redacted]"

// normalizeHeaders validates custom headers and returns them with canonical names.
func normalizeHeaders(in map[string]string) (headerMap, error) {
	if len(in) > maxCustomHeaders {
		return nil, fmt.Errorf("at most %d headers", maxCustomHeaders)
	}
	out := make(headerMap, len(in))
	size := 0
	names := make([]string, 0, len(in))
	for name := range in {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		value := in[name]
		if !validHeaderName(name) {
			return nil, fmt.Errorf("%q is not a valid header name", name)
		}
		canonical := textproto.CanonicalMIMEHeaderKey(name)
		if refusedHeaders[canonical] || strings.HasPrefix(strings.ToLower(canonical), "webhook-") {
			return nil, fmt.Errorf("%s may not be set: hop-by-hop, Host, Content-Length, Content-Type and webhook-* are the sender's", canonical)
		}
		if _, dup := out[canonical]; dup {
			return nil, fmt.Errorf("%s is given twice", canonical)
		}
		if !validHeaderValue(value) {
			return nil, fmt.Errorf("the value of %s must be visible ASCII, spaces or tabs, not empty", canonical)
		}
		size += len(canonical) + len(value)
		out[canonical] = value
	}
	if size > maxCustomHeaderBytes {
		return nil, fmt.Errorf("names and values must total at most %d bytes", maxCustomHeaderBytes)
	}
	return out, nil
}

// validHeaderName is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validHeaderValue allows visible ASCII, space and tab: no line breaks (no header injection), no
// control bytes; surrounding whitespace would be trimmed by receivers, so it is refused too.
func validHeaderValue(s string) bool {
	if s == "" || strings.TrimSpace(s) != s {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// redacted shows which headers are set, never their values.
func (h headerMap) redacted() map[string]string {
	out := make(map[string]string, len(h))
	for name := range h {
		out[name] = redactedValue
	}
	return out
}
