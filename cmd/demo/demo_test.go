package main

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestScenariosKeepTheirPromises runs every scenario; each returns an error when it
// observes a broken promise (a notice in the wrong lane, a lost answer, a child that
// did not resume).
func TestScenariosKeepTheirPromises(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if err := sc.run(&timeline{start: time.Now()}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
