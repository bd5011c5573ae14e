package concurrency

import (
	"fmt"
	"reflect"

	"gorm.io/gorm"
)

// elemType is the struct type a statement reads into or writes from.
func elemType(rv reflect.Value) reflect.Type {
	if !rv.IsValid() {
		return nil
	}
	t := rv.Type()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	return t
}

// eachEntity calls fn for every addressable struct of type want held by rv (a struct, or a slice/array of them or of pointers).
func eachEntity(rv reflect.Value, want reflect.Type, fn func(reflect.Value)) {
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Struct:
		if rv.Type() == want && rv.CanAddr() {
			fn(rv)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < rv.Len(); i++ {
			eachEntity(rv.Index(i), want, fn)
		}
	}
}

func copyValues(src map[string]any, size int) map[string]any {
	dst := make(map[string]any, size)
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// instanceKey mirrors gorm.DB.InstanceSet's key so a setting can be removed once used.
func instanceKey(stmt *gorm.Statement, key string) string { return fmt.Sprintf("%p", stmt) + key }
