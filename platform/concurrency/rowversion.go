package concurrency

import (
	"fmt"
	"strconv"
	"strings"
)

// RowVersion is PostgreSQL's xmin: the id of the transaction that last wrote the row.
// Map it with the tag `gorm:"column:xmin;->;-:migration;default:(-)"`; compare it for equality only.
type RowVersion uint32

// String is the decimal form used as the ETag and the API's version field.
func (v RowVersion) String() string { return strconv.FormatUint(uint64(v), 10) }

// ParseRowVersion reads a version sent back by a client (If-Match or a version field);
// surrounding double quotes of a strong ETag are accepted.
func ParseRowVersion(s string) (RowVersion, error) {
	raw := strings.TrimSpace(s)
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		raw = raw[1 : len(raw)-1]
	}
	if raw == "" || raw[0] == '+' || raw[0] == '-' {
		return 0, fmt.Errorf("concurrency: invalid row version %q", s)
	}
	n, err := strconv.ParseUint(raw, 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("concurrency: invalid row version %q", s)
	}
	return RowVersion(n), nil
}

// MarshalText makes a version the decimal string clients see in JSON (the API's "version" field).
func (v RowVersion) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText reads a version written by MarshalText.
func (v *RowVersion) UnmarshalText(b []byte) error {
	parsed, err := ParseRowVersion(string(b))
	if err != nil {
		return err
	}
	*v = parsed
	return nil
}
