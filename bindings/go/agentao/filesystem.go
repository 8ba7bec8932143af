package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"io/fs"
	"math"
	"runtime/cgo"
	"syscall"
	"time"
	"unsafe"
)

// FileKind is what a path is, in a FileSystem answer.
type FileKind int32

const (
	KindOther FileKind = C.AGENTAO_FS_KIND_OTHER
	KindFile  FileKind = C.AGENTAO_FS_KIND_FILE
	KindDir   FileKind = C.AGENTAO_FS_KIND_DIR
)

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string // a name, not a path
	Kind FileKind
	Size uint64 // ignored for directories
}

// WalkEntry is one descendant found by Walk.
type WalkEntry struct {
	Path string // absolute, under the walked directory
	Kind FileKind
}

// FileInfo is what Stat answers (symlinks followed).
type FileInfo struct {
	Size    uint64
	ModTime time.Time
	Kind    FileKind
}

// FileSystem serves every file tool of an agent (read_file, write_file, replace,
// list_directory, glob, search_file_content): see SetFileSystem. Paths are absolute; the path
// policy has already checked them. Methods run on library threads, several at once.
//
// An error is reported to the model as the OS error it wraps (a syscall.Errno, or
// fs.ErrNotExist / fs.ErrPermission / fs.ErrExist); any other error, and a panic, as EIO.
type FileSystem interface {
	// ReadFile returns the file's content; at most maxBytes from its start (more is cut)
	// unless maxBytes is math.MaxUint64.
	ReadFile(path string, maxBytes uint64) ([]byte, error)
	// WriteFile replaces the content atomically (appends when appendTo), creating missing
	// parent directories.
	WriteFile(path string, data []byte, appendTo bool) error
	// ListDir returns the entries of a directory (not . and ..).
	ListDir(path string) ([]DirEntry, error)
	// Walk returns every descendant of base down to maxDepth levels (negative: no limit),
	// not following symlinked directories.
	Walk(base string, maxDepth int) ([]WalkEntry, error)
	// Stat describes path; a missing one is fs.ErrNotExist.
	Stat(path string) (FileInfo, error)
}

// errnoOf maps an error to the errno value the library expects (0 for nil).
func errnoOf(err error) C.int32_t {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	switch {
	case errors.As(err, &en) && en > 0:
		return C.int32_t(en)
	case errors.Is(err, fs.ErrNotExist):
		return C.int32_t(syscall.ENOENT)
	case errors.Is(err, fs.ErrPermission):
		return C.int32_t(syscall.EACCES)
	case errors.Is(err, fs.ErrExist):
		return C.int32_t(syscall.EEXIST)
	}
	return C.int32_t(syscall.EIO)
}

// fsCall runs one slot; a panic answers EIO.
func fsCall(h C.uintptr_t, fn func(FileSystem) error) (rc C.int32_t) {
	defer func() {
		if recover() != nil {
			rc = C.int32_t(syscall.EIO)
		}
	}()
	return errnoOf(fn(cgo.Handle(h).Value().(FileSystem)))
}

// A setter's failure fails the operation in the library, which names the problem.
func fsAnswer(st C.agentao_status, cerr *C.agentao_error) { C.agentao_error_free(cerr) }

func bytesPtr(b []byte) *C.uint8_t {
	if len(b) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(b)))
}

//export goAgentaoFsRead
func goAgentaoFsRead(h C.uintptr_t, path *C.char, maxBytes C.uint64_t, out *C.agentao_fs_out) C.int32_t {
	return fsCall(h, func(f FileSystem) error {
		data, err := f.ReadFile(C.GoString(path), uint64(maxBytes))
		if err != nil {
			return err
		}
		if uint64(maxBytes) != math.MaxUint64 && uint64(len(data)) > uint64(maxBytes) {
			data = data[:maxBytes]
		}
		var cerr *C.agentao_error
		fsAnswer(C.agentao_fs_out_set_data(out, bytesPtr(data), C.size_t(len(data)), &cerr), cerr)
		return nil
	})
}

//export goAgentaoFsWrite
func goAgentaoFsWrite(h C.uintptr_t, path *C.char, data *C.uint8_t, n C.size_t, appendTo C.bool) C.int32_t {
	return fsCall(h, func(f FileSystem) error {
		var b []byte
		if n > 0 {
			b = C.GoBytes(unsafe.Pointer(data), C.int(n))
		}
		return f.WriteFile(C.GoString(path), b, bool(appendTo))
	})
}

//export goAgentaoFsListDir
func goAgentaoFsListDir(h C.uintptr_t, path *C.char, out *C.agentao_fs_out) C.int32_t {
	return fsCall(h, func(f FileSystem) error {
		entries, err := f.ListDir(C.GoString(path))
		if err != nil {
			return err
		}
		for _, e := range entries {
			cn := C.CString(sanitize(e.Name))
			var cerr *C.agentao_error
			fsAnswer(C.agentao_fs_out_add_entry(out, cn, C.int32_t(e.Kind), C.uint64_t(e.Size), &cerr), cerr)
			freeC(cn)
		}
		return nil
	})
}

//export goAgentaoFsWalk
func goAgentaoFsWalk(h C.uintptr_t, base *C.char, maxDepth C.int32_t, out *C.agentao_fs_out) C.int32_t {
	return fsCall(h, func(f FileSystem) error {
		entries, err := f.Walk(C.GoString(base), int(maxDepth))
		if err != nil {
			return err
		}
		for _, e := range entries {
			cp := C.CString(sanitize(e.Path))
			var cerr *C.agentao_error
			fsAnswer(C.agentao_fs_out_add_path(out, cp, C.int32_t(e.Kind), &cerr), cerr)
			freeC(cp)
		}
		return nil
	})
}

//export goAgentaoFsStat
func goAgentaoFsStat(h C.uintptr_t, path *C.char, out *C.agentao_fs_out) C.int32_t {
	return fsCall(h, func(f FileSystem) error {
		info, err := f.Stat(C.GoString(path))
		if err != nil {
			return err
		}
		mtime := float64(info.ModTime.UnixNano()) / 1e9
		if info.ModTime.IsZero() {
			mtime = 0
		}
		var cerr *C.agentao_error
		fsAnswer(C.agentao_fs_out_set_stat(out, C.uint64_t(info.Size), C.double(mtime), C.int32_t(info.Kind), &cerr), cerr)
		return nil
	})
}

// SetFileSystem serves the agent's file tools from fsys (nil restores the local disk). Right
// after New or between turns: StatusTurnInProgress while a turn runs.
func (a *Agent) SetFileSystem(fsys FileSystem) error {
	return a.setCapability(fsys != nil, fsys, func(p *C.agentao_agent, h C.uintptr_t, e **C.agentao_error) C.agentao_status {
		return C.agentao_go_set_file_system(p, h, e)
	})
}
