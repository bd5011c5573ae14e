package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/platform/apperr"
)

// MaxJSONDepth is how deeply objects and arrays may nest in a request body.
const MaxJSONDepth = 32

// jsonGuard refuses, before any handler runs, a well-formed JSON body that PostgreSQL (jsonb, text) or
// the webhook signer cannot hold: it answers 422 naming the field, so nothing is written. Bodies that
// are not JSON, or not well-formed, pass through to the route's own binding, which answers 415/400.
func jsonGuard() gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.Body == nil || c.Request.Body == http.NoBody || !isJSONMediaType(c.GetHeader("Content-Type")) {
			c.Next()
			return
		}
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeProblem(c, tooLarge())
				return
			}
			writeError(c, newProblem(http.StatusBadRequest, CodeMalformedJSON, "the request body could not be read"))
			return
		}
		c.Request.Body = io.NopCloser(bytes.NewReader(body))
		if fe := CheckJSON(body); fe != nil {
			writeError(c, newProblem(http.StatusUnprocessableEntity, CodeValidationFailed,
				"the request body holds a value that cannot be stored unambiguously", *fe))
			return
		}
		c.Next()
	}
}

// CheckJSON finds the first value of a JSON document that cannot be stored: a string (or key) with
// \u0000, a lone UTF-16 surrogate or invalid UTF-8; a number a double cannot hold (beyond ±1.8e308,
// or a non-zero one that rounds to 0); nesting deeper than MaxJSONDepth; a key given twice in one object. It returns nil for such a
// document and for one that is not well-formed JSON (the binder reports that).
func CheckJSON(doc []byte) *apperr.FieldError {
	if !json.Valid(doc) {
		return nil
	}
	s := &jsonScanner{doc: doc}
	s.skipSpace()
	s.value("", 0)
	return s.problem
}

type jsonScanner struct {
	doc     []byte
	pos     int
	problem *apperr.FieldError
}

func (s *jsonScanner) fail(path, message string) {
	if s.problem == nil {
		if path == "" {
			path = "body"
		}
		s.problem = &apperr.FieldError{Field: path, Message: message}
	}
}

func (s *jsonScanner) skipSpace() {
	for s.pos < len(s.doc) {
		switch s.doc[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans one value of a document json.Valid accepted, stopping at the first problem.
func (s *jsonScanner) value(path string, depth int) {
	if s.problem != nil {
		return
	}
	switch s.doc[s.pos] {
	case '{':
		if depth+1 > MaxJSONDepth {
			s.fail(path, "nests deeper than "+strconv.Itoa(MaxJSONDepth)+" levels")
			return
		}
		s.pos++
		s.skipSpace()
		if s.doc[s.pos] == '}' {
			s.pos++
			return
		}
		var keys objectKeys // this object's keys so far: jsonb and the decoder would silently keep one of two
		for s.problem == nil {
			s.skipSpace()
			key, ok := s.str(path)
			if !ok {
				return
			}
			child := key
			if path != "" {
				child = path + "." + key
			}
			if !keys.add(key) {
				s.fail(child, "is given twice in one object; keys must be unique")
				return
			}
			s.skipSpace()
			s.pos++ // ':'
			s.skipSpace()
			s.value(child, depth+1)
			s.skipSpace()
			if s.problem != nil {
				return
			}
			if s.doc[s.pos] == '}' {
				s.pos++
				return
			}
			s.pos++ // ','
		}
	case '[':
		if depth+1 > MaxJSONDepth {
			s.fail(path, "nests deeper than "+strconv.Itoa(MaxJSONDepth)+" levels")
			return
		}
		s.pos++
		s.skipSpace()
		if s.doc[s.pos] == ']' {
			s.pos++
			return
		}
		for i := 0; s.problem == nil; i++ {
			s.skipSpace()
			s.value(path+"["+strconv.Itoa(i)+"]", depth+1)
			s.skipSpace()
			if s.problem != nil {
				return
			}
			if s.doc[s.pos] == ']' {
				s.pos++
				return
			}
			s.pos++ // ','
		}
	case '"':
		s.str(path)
	case 't':
		s.pos += len("true")
	case 'f':
		s.pos += len("false")
	case 'n':
		s.pos += len("null")
	default:
		s.number(path)
	}
}

// objectKeys is the set of an object's keys: a slice while small, a map past that, so a body of a
// million keys costs no quadratic time.
type objectKeys struct {
	few  []string
	many map[string]struct{}
}

// add reports false when key is already in the set.
func (k *objectKeys) add(key string) bool {
	if k.many == nil {
		if slices.Contains(k.few, key) {
			return false
		}
		if len(k.few) < 16 {
			k.few = append(k.few, key)
			return true
		}
		k.many = make(map[string]struct{}, 64)
		for _, f := range k.few {
			k.many[f] = struct{}{}
		}
	}
	if _, dup := k.many[key]; dup {
		return false
	}
	k.many[key] = struct{}{}
	return true
}

// str scans a string, returning its text (for object keys, as the path names them).
func (s *jsonScanner) str(path string) (string, bool) {
	s.pos++ // opening quote
	var out strings.Builder
	for {
		c := s.doc[s.pos]
		switch {
		case c == '"':
			s.pos++
			return out.String(), true
		case c == '\\':
			if s.doc[s.pos+1] != 'u' {
				out.WriteByte(unescape(s.doc[s.pos+1]))
				s.pos += 2
				continue
			}
			r := hex4(s.doc[s.pos+2 : s.pos+6])
			s.pos += 6
			switch {
			case r == 0:
				s.fail(path, `holds \u0000, which text and jsonb cannot store`)
				return "", false
			case utf16.IsSurrogate(r):
				if r >= 0xDC00 || s.pos+6 > len(s.doc) || s.doc[s.pos] != '\\' || s.doc[s.pos+1] != 'u' {
					s.fail(path, "holds a lone UTF-16 surrogate")
					return "", false
				}
				low := hex4(s.doc[s.pos+2 : s.pos+6])
				if low < 0xDC00 || low > 0xDFFF {
					s.fail(path, "holds a lone UTF-16 surrogate")
					return "", false
				}
				s.pos += 6
				out.WriteRune(utf16.DecodeRune(r, low))
			default:
				out.WriteRune(r)
			}
		case c < utf8.RuneSelf:
			out.WriteByte(c)
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.doc[s.pos:])
			if r == utf8.RuneError && size <= 1 {
				s.fail(path, "is not valid UTF-8")
				return "", false
			}
			out.WriteRune(r)
			s.pos += size
		}
	}
}

// number refuses a number a double cannot represent: receivers and the signer's re-encoding parse
// JSON numbers as doubles, and jsonb refuses the largest exponents outright.
func (s *jsonScanner) number(path string) {
	start := s.pos
	for s.pos < len(s.doc) && strings.IndexByte("+-0123456789.eE", s.doc[s.pos]) >= 0 {
		s.pos++
	}
	lit := string(s.doc[start:s.pos])
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		s.fail(path, "is a number beyond what a double holds (±1.8e308)")
		return
	}
	if f == 0 && strings.ContainsAny(mantissa(lit), "123456789") {
		s.fail(path, "is a non-zero number too small for a double (it would become 0)")
	}
}

func mantissa(lit string) string {
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		return lit[:i]
	}
	return lit
}

func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}

func unescape(c byte) byte {
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	default:
		return c // '"', '\\', '/'
	}
}
