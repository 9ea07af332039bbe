package regions

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/region/regiontest"
	"github.com/heapline/heapline/internal/testkit"
)

// The live file, through the checks and the mapping of Read; and the
// region a killed process left behind.
func TestInspectProfile(t *testing.T) {
	regiontest.UseDir(t)
	me := os.Getpid()
	f := regiontest.Sample(me)
	f.StartTicks = ownStartTicks(t)
	p := regiontest.SampleProfile(me)
	f.Profile = &p
	regiontest.Map(t, regiontest.Write(t, "heapline."+strconv.Itoa(me), f.Bytes()))
	e, got := InspectProfile(me)
	if e.Err != nil || e.Stale || e.Summary != regiontest.SampleWant(me) {
		t.Fatalf("InspectProfile entry: err %v stale %v summary %+v", e.Err, e.Stale, e.Summary)
	}
	want := regiontest.SampleProfileWant(me)
	want.Root = "/proc/" + strconv.Itoa(me) + "/root" // its files as it sees them
	want.UID = os.Geteuid()                           // the file's owner
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("InspectProfile =\n%+v\nwant\n%+v", got, want)
	}
	if e.prof != nil || Inspect(me).prof != nil {
		t.Fatal("an entry keeps the profile it was read with")
	}

	dead := testkit.DeadPID(t)
	d := regiontest.SampleProfile(dead)
	regiontest.Write(t, "heapline."+strconv.Itoa(dead), regiontest.EncodeProfile(d, uint32(os.Geteuid())))
	e, got = InspectProfile(dead)
	want = regiontest.SampleProfileWant(dead)
	want.UID = os.Geteuid()
	if e.Err != nil || !e.Stale || !reflect.DeepEqual(got, want) {
		t.Fatalf("a dead process's region: err %v stale %v profile %+v", e.Err, e.Stale, got)
	}

	// No profile: sampling was off.
	regiontest.Write(t, "heapline."+strconv.Itoa(me), regiontest.Sample(me).Bytes())
	if e, _ := InspectProfile(me); !errors.Is(e.Err, region.ErrNoProfile) || !strings.HasPrefix(e.Err.Error(), region.Path(me)+": ") {
		t.Fatalf("a region without a profile: err %v, want ErrNoProfile naming the file", e.Err)
	}
	if e := Inspect(me); e.Err != nil {
		t.Fatalf("Inspect of a region without a profile: %v", e.Err)
	}
}
