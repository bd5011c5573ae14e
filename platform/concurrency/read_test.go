package concurrency_test

import (
	"testing"

	"github.com/keelson/keelson/platform/concurrency"
)

func TestReadsSelectTheVersion(t *testing.T) {
	db, _ := replicas(t)
	o := createOrder(t, db, "A")
	c := db.Conn(ctx(t))
	if err := c.Create(&Line{OrderID: o.ID, Sku: "s1"}).Error; err != nil {
		t.Fatal(err)
	}

	var first, take Order
	var found []Order
	var ptrs []*Order
	must(t, c.First(&first, o.ID).Error)
	must(t, c.Take(&take, "id = ?", o.ID).Error)
	must(t, c.Find(&found).Error)
	must(t, c.Where("id = ?", o.ID).Find(&ptrs).Error)
	for name, v := range map[string]concurrency.RowVersion{"First": first.Version, "Take": take.Version, "Find": found[0].Version, "Find ptrs": ptrs[0].Version} {
		if v == 0 || v != o.Version {
			t.Errorf("%s read version %v, want %v", name, v, o.Version)
		}
	}

	var withLines Order
	must(t, c.Preload("Lines").First(&withLines, o.ID).Error)
	if len(withLines.Lines) != 1 || withLines.Lines[0].Version == 0 {
		t.Fatalf("Preload lost the child version: %+v", withLines.Lines)
	}
	var joined []Line
	must(t, c.Joins("JOIN orders ON orders.id = lines.order_id").Find(&joined).Error)
	if len(joined) != 1 || joined[0].Version == 0 {
		t.Fatalf("a join read lost the version: %+v", joined)
	}

	// An explicit Select is the caller's: no xmin added.
	var narrow Order
	must(t, c.Select("id", "code").First(&narrow, o.ID).Error)
	if narrow.Version != 0 || narrow.Code != "A" {
		t.Fatalf("explicit select = %+v", narrow)
	}
	var n int64
	must(t, c.Model(&Order{}).Count(&n).Error)
	var codes []string
	must(t, c.Model(&Order{}).Pluck("code", &codes).Error)
	if n != 1 || len(codes) != 1 {
		t.Fatalf("count %d, pluck %v", n, codes)
	}
	// A chain reused after Find still counts.
	chain := c.Model(&Order{}).Where("code = ?", "A")
	var again []Order
	must(t, chain.Find(&again).Error)
	must(t, chain.Count(&n).Error)
	if n != 1 {
		t.Fatalf("count on a reused chain = %d", n)
	}
}

func TestRowVersionText(t *testing.T) {
	v := concurrency.RowVersion(3_000_000_000)
	if v.String() != "3000000000" {
		t.Fatalf("String = %q", v.String())
	}
	for in, want := range map[string]concurrency.RowVersion{"3000000000": v, `"17"`: 17, "4294967295": 4294967295} {
		got, err := concurrency.ParseRowVersion(in)
		if err != nil || got != want {
			t.Errorf("ParseRowVersion(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "0", "-1", "+1", "4294967296", "abc", `W/"1"`, "1.5"} {
		if _, err := concurrency.ParseRowVersion(bad); err == nil {
			t.Errorf("ParseRowVersion(%q) accepted", bad)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
