package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/heapline/heapline/ctl/internal/clikit"
	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/pyheap"
	"github.com/heapline/heapline/ctl/internal/region"
	"github.com/heapline/heapline/ctl/internal/regions"
	"github.com/heapline/heapline/ctl/internal/report"
)

// objectsCommand lists a live CPython's objects by type, read from outside.
func objectsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "objects",
		Usage: "list a running CPython's live objects by type (count and sys.getsizeof bytes), read from pymalloc's pools and the GC lists from outside",
		Description: `Reads every live block of pymalloc's pools, in the arenas the shim lists, with process_vm_readv
(the process's owner or root only), and names each object's type from its ob_type, checked as a
type object. CPython 3.11 and later, not free-threaded: from 3.13 the layout is the interpreter's
own _Py_DebugOffsets. The process runs on while it is read unless --stop is given; the blocks that
held no object of a type found (buffers, dict keys, or changed under the read) are counted apart.
Objects of more than 512 bytes, malloc's, are found on the interpreters' GC generation lists
(from _PyRuntime, which the python program or libpython exports); the untracked ones (a long str
or bytes) through the items of the lists, tuples, dicts and sets found. Bytes are sys.getsizeof's:
a list's, dict's, set's and bytearray's buffer counted. Under the table, a line says how much of
the live heap (malloc's live bytes and pymalloc's arenas) the objects listed hold, and what the
rest is; another, where the largest sampled blocks over 512 B still live were allocated.`,
		ArgsUsage: "PID",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "top", Value: 20, Usage: "types to list, the largest bytes first; 0 for all"},
			&cli.BoolFlag{Name: "json", Usage: `a JSON list of {"type", "count", "bytes"}, the largest first`},
			&cli.BoolFlag{Name: "stop", Usage: "stop the process (SIGSTOP) while its arenas and GC lists are read, and say for how long; it is continued even if heapctl is killed"},
		},
		Action: func(c *cli.Context) error {
			return objects(e, c.Args().Slice(), c.Int("top"), c.Bool("json"), c.Bool("stop"))
		},
	}
}

func objects(e *env, args []string, top int, asJSON, stop bool) error {
	pid, err := clikit.OnePID("objects", args)
	if err != nil {
		return err
	}
	if err := clikit.AtLeast("--top", top, 0); err != nil {
		return fmt.Errorf("objects: %w", err)
	}
	ent, prof := regions.InspectProfile(pid)
	if ent.Err != nil && errors.Is(ent.Err, region.ErrNoProfile) {
		ent = regions.Inspect(pid) // sampling off: no sites
	}
	if ent.Err != nil {
		return fmt.Errorf("objects: %w", follow.RegionError(pid, ent, false))
	}
	if ent.State() != report.Running || ent.Summary.Exited {
		return fmt.Errorf("objects: pid %d is not running under libheap.so now: its objects cannot be read", pid)
	}
	a := ent.PyArenas
	if err := pyheap.Walkable(a); err != nil {
		return fmt.Errorf("objects: pid %d %w", pid, err)
	}
	roots, err := pyheap.FindGC(ent.Proc, a.Version) // before the stop: it reads files
	if err != nil {
		return fmt.Errorf("objects: pid %d runs %w", pid, err)
	}
	release := func() {}
	if stop {
		if release, err = pyheap.Hold(ent.Proc); err != nil {
			return fmt.Errorf("objects: %w", err)
		}
		defer release()
	}
	o, err := pyheap.WalkObjects(ent.Proc, a.Version, a, roots, release)
	if err != nil {
		return fmt.Errorf("objects: pid %d: %w", pid, err)
	}
	if o.GC.Err != nil {
		e.log.Warn("its GC lists were not read: objects of more than 512 bytes are not listed", zap.Int("pid", pid), zap.Error(o.GC.Err))
	}
	types := o.Types
	if top > 0 && len(types) > top {
		types = types[:top]
	}
	if asJSON {
		if types == nil {
			types = []pyheap.TypeCount{}
		}
		return clikit.WriteJSON(e.stdout, types)
	}
	// the shim's live bytes as of the walk, not of the look-up before it
	malloc := ent.Summary.LiveBytes
	if s, err := regions.Read(pid); err == nil {
		malloc = s.LiveBytes
	}
	acct := pyheap.Accounting(o, uint64(max(malloc, 0)))
	_, err = fmt.Fprint(e.stdout, pyheap.Table(o, types, stop, &acct, pyheap.Sites(prof)))
	return err
}
