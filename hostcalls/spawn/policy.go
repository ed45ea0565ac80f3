package spawn

import (
	"os"
	"path/filepath"
	"strings"

	"lemon/hostcalls"
	"lemon/protocol"
)

// resolveCommand finds the executable argv[0] names and applies the
// command policy. A bare name is looked up in the fixed environment's PATH
// (absolute entries only); an absolute path is used as is. The executable
// must be a regular file with an execute bit; the OS makes the final
// permission decision at exec.
//
// Policy (spec execution-policy "allowed_commands", worker policy): the
// identities of the command are its requested name (bare argv[0]), its
// resolved path and that path's symlink target.
//
//   - blocked when an entry without '/' equals the requested name or the
//     base name of the resolved path or target, or an absolute entry (or
//     its symlink target) equals the resolved path or target, or an entry
//     (a bare one as PATH resolves it) is the same file (device and inode)
//     as the resolved executable, which covers hard links;
//   - when allowed_commands is restricted, allowed only when an entry
//     without '/' equals the requested name or resolves through PATH to
//     the same path or target, or an absolute entry (or its symlink
//     target) equals the resolved path or target. A bare entry never
//     allows an absolute argv[0] that merely shares its base name.
//
// Matching is a policy check, not a sandbox: the file at the path can
// change between the check and exec.
func (s *Spawner) resolveCommand(argv0 string) (string, *protocol.Error) {
	path, ok := s.lookPath(argv0)
	if !ok {
		if strings.HasPrefix(argv0, "/") {
			if st, err := os.Stat(argv0); err == nil && (st.IsDir() || st.Mode()&0o111 == 0) {
				return "", protocol.DomainError(protocol.CodeForbidden, protocol.DomainPermissionDenied,
					"the command is not an executable file").WithRetry(true, false)
			}
		}
		return "", protocol.DomainError(protocol.CodeNotFound, protocol.DomainExecutableNotFound,
			"executable not found").WithRetry(true, false)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path
	}
	name := ""
	if !strings.Contains(argv0, "/") {
		name = argv0
	}
	if s.blocked(s.cfg.BlockedCommands, name, path, real) || !s.allowed(argv0, name, path, real) {
		return "", errCommandNotAllowed()
	}
	return path, nil
}

func errCommandNotAllowed() *protocol.Error {
	return protocol.DomainError(protocol.CodeForbidden, protocol.DomainCommandNotAllowed,
		"the node's policy does not allow this command").WithRetry(false, false)
}

// errTimeoutLimit refuses a run whose timeoutMs exceeds the execution
// context's max_timeout_ms.
var errTimeoutLimit = protocol.DomainError(protocol.CodeForbidden, protocol.DomainLimitExceeded,
	"timeoutMs exceeds the execution context's max_timeout_ms").WithRetry(false, false)

// errOutputLimit refuses a run whose maxOutputBytes exceeds the
// execution context's max_output_bytes.
var errOutputLimit = protocol.DomainError(protocol.CodeForbidden, protocol.DomainLimitExceeded,
	"maxOutputBytes exceeds the execution context's max_output_bytes").WithRetry(false, false)

// errNoSandbox refuses a sandboxed run on a node that cannot give it a
// cgroup of its own.
var errNoSandbox = protocol.DomainError(protocol.CodeForbidden, protocol.DomainSandboxUnavailable,
	"the execution context asks for a sandbox and this node cannot give the run a cgroup of its own").WithRetry(false, false)

// contextAllows applies the execution context's commands on top of the
// worker policy (docs/PROCESS.md, "Command policy"): its blocked commands
// block like the policy's; when it restricts commands, argv[0] must match
// an entry, where a bare entry allows only that bare argv[0] (never a path
// that resolves to the same file) and a path entry allows argv[0] only
// when it is the same file and has the same base name (a multi-call
// binary such as busybox chooses its program by that name).
func (s *Spawner) contextAllows(a hostcalls.Authority, argv0, path string) bool {
	if !a.Restricted && len(a.Blocked) == 0 {
		return true
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path
	}
	name := ""
	if !strings.Contains(argv0, "/") {
		name = argv0
	}
	if s.blocked(a.Blocked, name, path, real) {
		return false
	}
	if !a.Restricted {
		return true
	}
	for _, e := range a.Commands {
		switch {
		case e == "all":
			return true
		case e == "":
		case !strings.Contains(e, "/"):
			if e == name {
				return true
			}
		case filepath.Base(e) == filepath.Base(argv0) && s.samePath(e, path, real):
			return true
		}
	}
	return false
}

// lookPath resolves argv0 to an absolute path of an executable regular
// file.
func (s *Spawner) lookPath(argv0 string) (string, bool) {
	if strings.HasPrefix(argv0, "/") {
		return argv0, isExecutable(argv0)
	}
	for _, d := range s.pathDirs {
		p := filepath.Join(d, argv0)
		if isExecutable(p) {
			return p, true
		}
	}
	return "", false
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

func (s *Spawner) blocked(list []string, name, path, real string) bool {
	var exe os.FileInfo // stat of the resolved executable, on first need
	for _, e := range list {
		if e == "" {
			continue
		}
		entry := e
		if !strings.Contains(e, "/") {
			if e == name || e == filepath.Base(path) || e == filepath.Base(real) {
				return true
			}
			p, ok := s.lookPath(e)
			if !ok {
				continue
			}
			entry = p
		} else if s.samePath(e, path, real) {
			return true
		}
		// The same file under another name (a hard link, or a path the
		// names above do not show) is blocked too. A copy is a different
		// file and is not (docs/PROCESS.md, "Command policy").
		if !filepath.IsAbs(entry) {
			continue
		}
		if exe == nil {
			st, err := os.Stat(path)
			if err != nil {
				continue
			}
			exe = st
		}
		if st, err := os.Stat(entry); err == nil && os.SameFile(st, exe) {
			return true
		}
	}
	return false
}

// allowed applies the worker policy's allowed_commands. A match by file
// (an entry that resolves to the same path or symlink target) also needs
// the same base name as argv[0]: on a multi-call binary (busybox) every
// program is one file, chosen by that name.
func (s *Spawner) allowed(argv0, name, path, real string) bool {
	if s.cfg.AllowedCommands == nil {
		return true
	}
	for _, e := range *s.cfg.AllowedCommands {
		if e == "all" {
			return true
		}
	}
	for _, e := range *s.cfg.AllowedCommands {
		if e == "" {
			continue
		}
		if !strings.Contains(e, "/") {
			if e == name {
				return true
			}
			if p, ok := s.lookPath(e); ok && filepath.Base(argv0) == e && s.samePath(p, path, real) {
				return true
			}
			continue
		}
		if filepath.Base(e) == filepath.Base(argv0) && s.samePath(e, path, real) {
			return true
		}
	}
	return false
}

// samePath reports whether the policy path e (or its symlink target) is
// the resolved path or its target.
func (s *Spawner) samePath(e, path, real string) bool {
	if !filepath.IsAbs(e) {
		return false
	}
	e = filepath.Clean(e)
	if e == path || e == real {
		return true
	}
	if er, err := filepath.EvalSymlinks(e); err == nil && (er == path || er == real) {
		return true
	}
	return false
}
