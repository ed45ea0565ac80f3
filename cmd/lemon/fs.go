package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
  get  NODE REMOTE LOCAL                 download a file of any size in chunks
  put  NODE LOCAL REMOTE [--overwrite] [--mkdirs]
                                         upload a file of any size in chunks

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
	recursive := fl.Bool("r", false, "rm: delete a nonempty directory tree")
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
	case "get":
		err = c.get(ctx, pos[1], pos[2], progressTo(os.Stderr))
	case "put":
		err = putMkdirsHint(c.put(ctx, pos[1], pos[2], *overwrite, *mkdirs, progressTo(os.Stderr)), *mkdirs)
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
	var pe *protocol.Error
	if errors.As(err, &pe) {
		fmt.Fprintln(os.Stderr, "lemon fs:", pe.Error())
	} else {
		fmt.Fprintln(os.Stderr, "lemon fs:", err)
	}
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

// readChunk and writeChunk size chunks so a frame fits the connection's
// maxPayload: base64 is 4/3 of the bytes, plus the JSON envelope.
const fsEnvelopeBytes = 2048

func (c *fsClient) readChunk() int64 {
	n := int64(c.conn.MaxPayload()-fsEnvelopeBytes) / 4 * 3
	return max(min(n, protocol.FSMaxReadLength), 1)
}

func (c *fsClient) writeChunk() int64 {
	n := int64(c.conn.MaxPayload()-fsEnvelopeBytes) / 4 * 3
	return max(min(n, protocol.FSMaxWriteBytes), 1)
}

// getWindow is how many reads are in flight at once during a download.
const getWindow = 4

// get downloads remote to local: it stats the file, fetches fixed ranges
// with getWindow reads in flight (re-asking for the rest of a short chunk),
// writes them at their offsets into a temporary file beside local, checks
// that the remote revision did not change meanwhile, and renames it into
// place.
func (c *fsClient) get(ctx context.Context, remote, local string, prog *progress) error {
	var st protocol.FSStat
	if err := c.call(ctx, "node.fs.stat", map[string]any{"path": remote}, &st); err != nil {
		return err
	}
	if st.Type != "regular" {
		return errors.New("remote path is not a regular file")
	}
	tmp, err := os.CreateTemp(filepath.Dir(local), ".lemon-get-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	chunk := c.readChunk()
	prog.start(st.Size)
	ranges := make(chan int64)
	errs := make(chan error, getWindow)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := 0; i < getWindow; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range ranges {
				end := min(off+chunk, st.Size)
				for off < end {
					var r protocol.FSReadResult
					if err := c.call(ctx, "node.fs.read", map[string]any{"path": st.Path, "offset": off, "length": end - off}, &r); err != nil {
						errs <- err
						cancel()
						return
					}
					b, err := base64.StdEncoding.DecodeString(r.DataBase64)
					if err != nil || int64(len(b)) != r.Length {
						errs <- errors.New("malformed read chunk")
						cancel()
						return
					}
					if len(b) == 0 {
						errs <- errors.New("remote file shrank during download")
						cancel()
						return
					}
					if _, err := tmp.WriteAt(b, off); err != nil {
						errs <- err
						cancel()
						return
					}
					off += int64(len(b))
					prog.add(int64(len(b)))
				}
			}
		}()
	}
feed:
	for off := int64(0); off < st.Size; off += chunk {
		select {
		case ranges <- off:
		case <-ctx.Done():
			break feed
		}
	}
	close(ranges)
	wg.Wait()
	prog.done()
	select {
	case err := <-errs:
		return err
	default:
	}
	var after protocol.FSStat
	if err := c.call(ctx, "node.fs.stat", map[string]any{"path": st.Path}, &after); err != nil {
		return err
	}
	if after.MtimeMs != st.MtimeMs || after.Size != st.Size {
		return errors.New("remote file changed during download; nothing written")
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), local)
}

// put uploads local to remote in chunks, each write carrying the previous
// write's mtimeMs as expectedModifiedAtMs (so a concurrent change on the
// node stops the upload with revision_conflict). The first write truncates;
// an existing remote file is replaced only with overwrite.
func (c *fsClient) put(ctx context.Context, local, remote string, overwrite, mkdirs bool, prog *progress) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("local path is not a regular file")
	}
	var rev int64
	if overwrite {
		var st protocol.FSStat
		var pe *protocol.Error
		err := c.call(ctx, "node.fs.stat", map[string]any{"path": remote}, &st)
		switch {
		case err == nil:
			rev = st.MtimeMs
		case errors.As(err, &pe) && pe.DomainCode() == protocol.DomainNotFound:
		default:
			return err
		}
	}
	chunk := c.writeChunk()
	buf := make([]byte, chunk)
	prog.start(fi.Size())
	defer prog.done()
	path := remote
	for off := int64(0); ; {
		n, rerr := io.ReadFull(f, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return rerr
		}
		if n == 0 && off > 0 {
			return nil
		}
		params := map[string]any{"path": path, "dataBase64": base64.StdEncoding.EncodeToString(buf[:n]),
			"offset": off, "truncate": true, "mkdirs": mkdirs && off == 0, "expectedModifiedAtMs": rev}
		var r protocol.FSWriteResult
		if err := c.call(ctx, "node.fs.write", params, &r); err != nil {
			var pe *protocol.Error
			if off == 0 && !overwrite && errors.As(err, &pe) && pe.DomainCode() == protocol.DomainRevisionConflict {
				return errors.New("the remote file exists; pass --overwrite to replace it")
			}
			return err
		}
		rev, path = r.MtimeMs, r.Path
		off += int64(n)
		prog.add(int64(n))
		if n < len(buf) {
			return nil
		}
	}
}

// progress draws a one-line progress bar on a terminal; elsewhere it is silent.
type progress struct {
	w       io.Writer
	mu      sync.Mutex
	total   int64
	sent    int64
	began   time.Time
	lastOut time.Time
}

func progressTo(f *os.File) *progress {
	if !interactive(f) {
		return nil
	}
	return &progress{w: f}
}

func (p *progress) start(total int64) {
	if p == nil {
		return
	}
	p.total, p.began = total, time.Now()
}

func (p *progress) add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent += n
	if time.Since(p.lastOut) > 100*time.Millisecond {
		p.draw()
	}
}

func (p *progress) draw() {
	p.lastOut = time.Now()
	frac := 1.0
	if p.total > 0 {
		frac = float64(p.sent) / float64(p.total)
	}
	const width = 30
	bar := strings.Repeat("#", int(frac*width)) + strings.Repeat(".", width-int(frac*width))
	rate := float64(p.sent) / max(time.Since(p.began).Seconds(), 1e-3) / 1e6
	fmt.Fprintf(p.w, "\r[%s] %5.1f%% %d/%d bytes %.1f MB/s", bar, frac*100, p.sent, p.total, rate)
}

func (p *progress) done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw()
	fmt.Fprintln(p.w)
}

// interactive reports whether f is a terminal (golang.org/x/term), so a
// confirmation can be asked. /dev/null is a character device but not a
// terminal: `lemon fs rm X </dev/null` is refused without --yes.
func interactive(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}
