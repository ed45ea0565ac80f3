package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"lemon/client"
	"lemon/protocol"
)

func init() {
	register("fs", "file operations on a node: ls, stat, mv, rm, get, put", func(args []string) int {
		return interruptible(func(ctx context.Context) int { return runFS(ctx, args) })
	})
	setUsage("fs", fsUsage)
}

const fsUsage = `usage: lemon fs [--controller URL] COMMAND NODE ARGS...

  ls   NODE PATH... [--all]              list directories (dot names with --all)
  stat NODE PATH...                      metadata as JSON
  mv   NODE SRC DST [--overwrite]        move (atomic; refuses to replace without --overwrite)
  rm   NODE PATH... [-r] [--yes]         preview, confirm, delete (-r for a nonempty directory)
  get  NODE REMOTE LOCAL [-r] [--overwrite] [--resume] [--parallel N]
                                         download a file (-r: a directory tree)
  put  NODE LOCAL REMOTE [-r] [--overwrite] [--mkdirs] [--resume] [--parallel N]
                                         upload a file (-r: a directory tree)

get and put stream over a data connection, check the node's sha256, and
write through a part file renamed into place at the end: an interrupted
transfer leaves nothing at the final name (docs/FS.md, "Transfers").

NODE is a nodeId or a node name. The operator token comes from LEMON_OPERATOR_TOKEN, else
LEMON_CONTROL_PLANE_OPERATOR_TOKEN; the controller from --controller, else $LEMON_CONTROLLER,
else ws://127.0.0.1:7777/ws. Flags may come anywhere on the line.
--ca-file FILE (default $LEMON_CA_FILE) trusts a private CA for wss://
(lemon tls dev writes one).
`

// fsCallTimeout bounds one request; the node's own deadline is 25 s.
const fsCallTimeout = 60 * time.Second

func runFS(ctx context.Context, args []string) int {
	// Flags may stand anywhere: before the command, between or after the
	// positional arguments.
	fl := flag.NewFlagSet("lemon fs", flag.ContinueOnError)
	fl.Usage = func() { fmt.Fprint(os.Stderr, fsUsage) }
	session := operatorFlags(fl, os.Getenv)
	all := fl.Bool("all", false, "ls: include dot names")
	overwrite := fl.Bool("overwrite", false, "mv, put: replace an existing destination")
	mkdirs := fl.Bool("mkdirs", false, "put: create missing parent directories")
	recursive := fl.Bool("r", false, "rm: delete a nonempty directory tree; get, put: copy a directory tree")
	resume := fl.Bool("resume", false, "get, put: continue from the part file an interrupted transfer left")
	parallel := fl.Int("parallel", 4, "get -r, put -r: files moved at once (1 to 64)")
	yes := fl.Bool("yes", false, "rm: do not ask for confirmation")
	rest, err := parseInterleaved(fl, args)
	if err != nil {
		return 2
	}
	if msg := fsWordsError(rest); msg != "" {
		return usageLine(os.Stderr, "fs", msg)
	}
	cmd, pos := rest[0], rest[1:]
	op, err := session()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lemon fs:", err)
		return 2
	}
	controller := &op.url
	token := op.token
	conn, err := client.Dial(ctx, *controller, client.Options{Token: token, Scopes: op.scopes, ClientID: "lemon-fs",
		CAFile: op.caFile, OnEvent: op.onEvent})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lemon fs:", err)
		return 1
	}
	defer conn.Close()
	c := &fsClient{conn: conn}
	node, perr := conn.ResolveNode(ctx, pos[0])
	if perr != nil {
		return fsFail(perr)
	}
	c.node = node
	switch cmd {
	case "ls":
		err = c.ls(ctx, os.Stdout, pos[1:], *all)
	case "stat":
		err = c.stat(ctx, os.Stdout, pos[1:])
	case "mv":
		err = c.mv(ctx, pos[1], pos[2], *overwrite)
	case "rm":
		if !*yes && !interactive(os.Stdin) {
			err = errors.New("refusing to delete without confirmation: stdin is not a terminal (pass --yes)")
			break
		}
		err = c.rm(ctx, os.Stdin, os.Stderr, pos[1:], *recursive, *yes)
	case "get", "put":
		err = c.transfer(ctx, cmd, pos[1], pos[2], transferFlags{overwrite: *overwrite, mkdirs: *mkdirs,
			recursive: *recursive, resume: *resume, parallel: *parallel})
		if cmd == "put" && !*recursive {
			err = putMkdirsHint(err, *mkdirs)
		}
	}
	if err != nil {
		return fsFail(err)
	}
	return 0
}

// parseInterleaved parses flags that may appear between positional args.
func parseInterleaved(fl *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fl.Parse(args); err != nil {
			return nil, err
		}
		args = fl.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func fsFail(err error) int {
	// A wrapped *protocol.Error prints its own text plus the wrapping
	// (transferError's hint to resume); a tree entry's name in it came from
	// the node, so it is made terminal-safe.
	fmt.Fprintln(os.Stderr, "lemon fs:", termSafe(err.Error()))
	return 1
}

// fsClient makes node.fs.* calls for one node over one connection.
type fsClient struct {
	conn *client.Conn
	node string
}

func (c *fsClient) call(ctx context.Context, method string, params map[string]any, out any) error {
	params["nodeId"] = c.node
	ctx, cancel := context.WithTimeout(ctx, fsCallTimeout)
	defer cancel()
	payload, perr := c.conn.Call(ctx, method, params)
	if perr != nil {
		return perr
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(payload, out); err != nil {
		return errors.New("malformed response payload")
	}
	return nil
}

func (c *fsClient) ls(ctx context.Context, w io.Writer, paths []string, all bool) error {
	// Columns as ls -l lays them out: mode and name left-aligned, the
	// size right-aligned (padded here; the tabwriter aligns left).
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	defer tw.Flush()
	for i, p := range paths {
		var r protocol.FSListResult
		if err := c.call(ctx, "node.fs.list", map[string]any{"path": p, "showHidden": all}, &r); err != nil {
			return err
		}
		if len(paths) > 1 {
			if i > 0 {
				fmt.Fprintln(tw)
			}
			fmt.Fprintf(tw, "%s:\n", termSafe(r.Path))
		}
		sizeWidth := 1
		for _, e := range r.Entries {
			if e.FSEntryStat != nil {
				sizeWidth = max(sizeWidth, len(strconv.FormatInt(e.Size, 10)))
			}
		}
		for _, e := range r.Entries {
			if e.FSEntryStat == nil {
				fmt.Fprintf(tw, "?\t%*s\t\t%s (%s)\n", sizeWidth, "", termSafe(e.Name), termSafe(e.Error))
				continue
			}
			fmt.Fprintf(tw, "%s\t%*d\t%s\t%s\n", os.FileMode(modeBits(e.Mode)).String(), sizeWidth, e.Size,
				time.UnixMilli(e.MtimeMs).Format("2006-01-02 15:04"), termSafe(e.Name))
		}
		if r.Truncated {
			fmt.Fprintf(tw, "(truncated at %d entries)\n", r.Limit)
		}
	}
	return nil
}

// modeBits converts st_mode to os.FileMode for display.
func modeBits(m uint32) uint32 {
	fm := os.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		fm |= os.ModeDir
	case unix.S_IFLNK:
		fm |= os.ModeSymlink
	case unix.S_IFIFO:
		fm |= os.ModeNamedPipe
	case unix.S_IFSOCK:
		fm |= os.ModeSocket
	case unix.S_IFCHR:
		fm |= os.ModeDevice | os.ModeCharDevice
	case unix.S_IFBLK:
		fm |= os.ModeDevice
	}
	return uint32(fm)
}

func (c *fsClient) stat(ctx context.Context, w io.Writer, paths []string) error {
	for _, p := range paths {
		var r json.RawMessage
		if err := c.call(ctx, "node.fs.stat", map[string]any{"path": p}, &r); err != nil {
			return err
		}
		var pretty any
		json.Unmarshal(r, &pretty)
		b, _ := json.MarshalIndent(pretty, "", "  ")
		fmt.Fprintln(w, string(b))
	}
	return nil
}

func (c *fsClient) mv(ctx context.Context, src, dst string, overwrite bool) error {
	var st protocol.FSStat
	if err := c.call(ctx, "node.fs.stat", map[string]any{"path": src}, &st); err != nil {
		return err
	}
	return c.call(ctx, "node.fs.move", map[string]any{"path": src, "destination": dst,
		"expectedModifiedAtMs": st.MtimeMs, "overwrite": overwrite}, nil)
}

func (c *fsClient) rm(ctx context.Context, in io.Reader, w io.Writer, paths []string, recursive, yes bool) error {
	for _, p := range paths {
		var pv protocol.FSDeletePreviewResult
		if err := c.call(ctx, "node.fs.delete.preview", map[string]any{"path": p, "recursive": recursive}, &pv); err != nil {
			return err
		}
		if !yes {
			fmt.Fprintf(w, "delete %s (%s, %d entries)? [y/N] ", termSafe(pv.Path), termSafe(pv.Stat.Type), pv.CandidateCount)
			// Read the answer aside, so SIGINT at the prompt ends the
			// command at once (exit 130) instead of waiting for a line.
			got := make(chan string, 1)
			go func() {
				var answer string
				fmt.Fscanln(in, &answer)
				got <- answer
			}()
			var answer string
			select {
			case answer = <-got:
			case <-ctx.Done():
				fmt.Fprintln(w)
				return ctx.Err()
			}
			if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
				fmt.Fprintln(w, "skipped")
				continue
			}
		}
		if err := c.call(ctx, "node.fs.delete", map[string]any{"path": p, "confirm": p,
			"confirmationToken": pv.ConfirmationToken}, nil); err != nil {
			return err
		}
	}
	return nil
}

// interactive reports whether f is a terminal (golang.org/x/term), so a
// confirmation can be asked. /dev/null is a character device but not a
// terminal: `lemon fs rm X </dev/null` is refused without --yes.
func interactive(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}
