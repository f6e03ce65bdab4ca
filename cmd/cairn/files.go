package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/spf13/cobra"
)

// defaultServerURL is used when neither --server nor CAIRN_SERVER is set.
const defaultServerURL = "http://127.0.0.1:8080"

// clientFlags holds the flags every client command shares.
type clientFlags struct {
	server string
	key    string
}

// addClientFlags registers --server and --key on cmd and its subcommands.
// The defaults are read from the environment when the command runs, so that
// --help never prints the key.
func addClientFlags(cmd *cobra.Command) *clientFlags {
	f := &clientFlags{}
	cmd.PersistentFlags().StringVar(&f.server, "server", "", "server URL (default $CAIRN_SERVER, else "+defaultServerURL+")")
	cmd.PersistentFlags().StringVar(&f.key, "key", "", "admin key (default $CAIRN_ADMIN_KEY)")
	return f
}

// client builds the API client from the flags and the environment.
func (f *clientFlags) client() *client.Client {
	server := f.server
	if server == "" {
		server = os.Getenv("CAIRN_SERVER")
	}
	if server == "" {
		server = defaultServerURL
	}
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	key := f.key
	if key == "" {
		key = os.Getenv("CAIRN_ADMIN_KEY")
	}
	return client.New(server, key, client.WithUserAgent("cairn-cli"))
}

// parseRemote splits "BUCKET/PATH" (a leading slash is allowed). PATH may be
// empty and keeps a trailing slash.
func parseRemote(arg string) (bucket, p string, err error) {
	arg = strings.TrimLeft(arg, "/")
	bucket, p, _ = strings.Cut(arg, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%q: expected BUCKET/PATH", arg)
	}
	return bucket, p, nil
}

func newPutCmd() *cobra.Command {
	var contentType string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "put LOCAL BUCKET/PATH",
		Short: "Upload one file (LOCAL '-' reads stdin; a PATH ending in '/' appends LOCAL's base name)",
		Args:  cobra.ExactArgs(2),
	}
	cf := addClientFlags(cmd)
	cmd.Flags().StringVar(&contentType, "content-type", "", "Content-Type to store (default: by extension)")
	addQuietFlag(cmd, &quiet)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		local := args[0]
		bucket, p, err := parseRemote(args[1])
		if err != nil {
			return err
		}
		if p == "" || strings.HasSuffix(p, "/") {
			if local == "-" {
				return errors.New("put from stdin needs a file name: BUCKET/PATH/NAME")
			}
			p += filepath.Base(local)
		}
		var (
			r    io.Reader
			size int64
			opts = client.PutOptions{ContentType: contentType}
		)
		if local == "-" {
			f, n, cleanup, err := stdinFile(cmd.InOrStdin())
			if err != nil {
				return err
			}
			defer cleanup()
			r, size = f, n
		} else {
			f, err := os.Open(local)
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			if st.IsDir() {
				return fmt.Errorf("%s is a directory (use cairn sync)", local)
			}
			r, size = f, st.Size()
			opts.ModTime, opts.Mode = st.ModTime(), uint32(st.Mode().Perm())
		}
		if opts.ContentType == "" {
			opts.ContentType = mime.TypeByExtension(path.Ext(p))
		}
		info, err := cf.client().Put(cmd.Context(), bucket, p, io.LimitReader(r, size), size, opts)
		if err != nil {
			return err
		}
		if !quiet {
			from := local
			if local == "-" {
				from = "stdin"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "uploaded %s -> %s/%s (%d bytes, etag %s)\n", from, bucket, info.Path, info.Size, info.ETag)
		}
		if info.CopiesWanted > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "cairn: warning: %s/%s is under-replicated: %d of %d copies (nodes are down); repair makes the rest when they return\n",
				bucket, info.Path, info.Copies, info.CopiesWanted)
		}
		return nil
	}
	return cmd
}

// addQuietFlag registers -q/--quiet: put, get and rm report what they did
// on stdout (one line per file) unless it is given.
func addQuietFlag(cmd *cobra.Command, quiet *bool) {
	cmd.Flags().BoolVarP(quiet, "quiet", "q", false, "print nothing on success")
}

// stdinFile returns stdin as a file of known size: stdin itself when it is
// a regular file, else a spooled temporary copy, since the server may refuse
// a body of unknown length.
func stdinFile(in io.Reader) (io.Reader, int64, func(), error) {
	if f, ok := in.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			off, err := f.Seek(0, io.SeekCurrent)
			if err == nil {
				return f, st.Size() - off, func() {}, nil
			}
		}
	}
	tmp, err := os.CreateTemp("", "cairn-put-*")
	if err != nil {
		return nil, 0, nil, err
	}
	cleanup := func() { tmp.Close(); os.Remove(tmp.Name()) }
	n, err := io.Copy(tmp, in)
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		cleanup()
		return nil, 0, nil, fmt.Errorf("read stdin: %w", err)
	}
	return tmp, n, cleanup, nil
}

func newGetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get BUCKET/PATH [LOCAL|-]",
		Short: "Download one file (atomically: temp file, then rename; '-' writes stdout)",
		Args:  cobra.RangeArgs(1, 2),
	}
	cf := addClientFlags(cmd)
	var quiet bool
	addQuietFlag(cmd, &quiet)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		bucket, p, err := parseRemote(args[0])
		if err != nil {
			return err
		}
		if strings.Trim(p, "/") == "" {
			return fmt.Errorf("%s: expected BUCKET/PATH of a file", args[0])
		}
		dest := path.Base(p)
		if len(args) == 2 {
			dest = args[1]
		}
		if dest != "-" {
			if st, err := os.Stat(dest); err == nil && st.IsDir() {
				dest = filepath.Join(dest, path.Base(p))
			}
		}
		body, info, err := cf.client().Get(cmd.Context(), bucket, p)
		if err != nil {
			return err
		}
		defer body.Close()
		if dest == "-" {
			return copyVerified(cmd.OutOrStdout(), body, info) // the content is the output
		}
		if err := writeAtomic(dest, body, info); err != nil {
			return err
		}
		if !quiet {
			fmt.Fprintf(cmd.OutOrStdout(), "downloaded %s/%s -> %s (%d bytes)\n", bucket, p, dest, info.Size)
		}
		return nil
	}
	return cmd
}

// copyVerified copies body to w and checks the length and SHA-256 the
// server announced.
func copyVerified(w io.Writer, body io.Reader, info client.ObjectInfo) error {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), body)
	if err != nil {
		return fmt.Errorf("download %s/%s: %w", info.Bucket, info.Path, err)
	}
	if n != info.Size {
		return fmt.Errorf("download %s/%s: got %d bytes, expected %d", info.Bucket, info.Path, n, info.Size)
	}
	if info.SHA256 != "" && hex.EncodeToString(h.Sum(nil)) != info.SHA256 {
		return fmt.Errorf("download %s/%s: SHA-256 mismatch", info.Bucket, info.Path)
	}
	return nil
}

// writeAtomic writes body to a temporary file next to dest, checks it,
// syncs it and renames it over dest, so dest is never seen half-written.
func writeAtomic(dest string, body io.Reader, info client.ObjectInfo) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".cairn-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = copyVerified(tmp, body, info); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if info.Mode != 0 {
		mode = fs.FileMode(info.Mode).Perm()
	}
	if err = os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	if !info.ModTime.IsZero() {
		if err = os.Chtimes(tmp.Name(), info.ModTime, info.ModTime); err != nil {
			return err
		}
	}
	return os.Rename(tmp.Name(), dest)
}

func newLsCmd() *cobra.Command {
	var recursive, long bool
	cmd := &cobra.Command{
		Use:   "ls [BUCKET[/DIR]]",
		Short: "List a directory (-r: every file below it), or the buckets",
		Args:  cobra.MaximumNArgs(1),
	}
	cf := addClientFlags(cmd)
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "list every file below DIR")
	cmd.Flags().BoolVarP(&long, "long", "l", false, "show mode, size and modification time")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c := cf.client()
		out := cmd.OutOrStdout()
		if len(args) == 0 {
			buckets, err := c.ListBuckets(cmd.Context())
			if err != nil {
				return err
			}
			for _, b := range buckets {
				fmt.Fprintln(out, b.Name+"/")
			}
			return nil
		}
		bucket, dir, err := parseRemote(args[0])
		if err != nil {
			return err
		}
		dir = strings.Trim(dir, "/")
		base := ""
		if dir != "" {
			base = dir + "/"
		}
		err = c.ListPages(cmd.Context(), bucket, dir, client.ListOptions{Recursive: recursive}, func(page client.ListResult) error {
			type row struct {
				name string
				info *client.ObjectInfo
			}
			rows := make([]row, 0, len(page.Entries)+len(page.CommonPrefixes))
			for i := range page.Entries {
				e := &page.Entries[i]
				name := strings.TrimPrefix(e.Path, base)
				if e.IsDir {
					name += "/"
				}
				rows = append(rows, row{name, e})
			}
			for _, cp := range page.CommonPrefixes {
				rows = append(rows, row{strings.TrimPrefix(cp, base), nil})
			}
			sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
			for _, r := range rows {
				if long {
					fmt.Fprintln(out, longLine(r.name, r.info))
				} else {
					fmt.Fprintln(out, r.name)
				}
			}
			return nil
		})
		if errors.Is(err, client.ErrNotFound) && dir != "" {
			// Maybe a file: list just it.
			if info, serr := c.Stat(cmd.Context(), bucket, dir); serr == nil && !info.IsDir {
				if long {
					fmt.Fprintln(out, longLine(path.Base(dir), &info))
				} else {
					fmt.Fprintln(out, path.Base(dir))
				}
				return nil
			}
		}
		return err
	}
	return cmd
}

// longLine formats one `ls -l` line; info nil is a directory.
func longLine(name string, info *client.ObjectInfo) string {
	if info == nil || info.IsDir {
		return fmt.Sprintf("%-10s %12s %19s  %s", "d---------", "-", "-", name)
	}
	mode := fs.FileMode(info.Mode).Perm().String()
	if info.Mode == 0 {
		mode = "----------"
	}
	return fmt.Sprintf("%-10s %12d %19s  %s", mode, info.Size, info.ModTime.Local().Format("2006-01-02 15:04:05"), name)
}

func newStatCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stat BUCKET/PATH",
		Short: "Show a file's size, ETag, SHA-256, type and modification time",
		Args:  cobra.ExactArgs(1),
	}
	cf := addClientFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the object info as JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		bucket, p, err := parseRemote(args[0])
		if err != nil {
			return err
		}
		info, err := cf.client().Stat(cmd.Context(), bucket, p)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if asJSON {
			return printJSON(out, info)
		}
		fmt.Fprintf(out, "path:   %s/%s\n", bucket, info.Path)
		if info.IsDir {
			fmt.Fprintln(out, "type:   directory")
			return nil
		}
		fmt.Fprintf(out, "size:   %d\n", info.Size)
		fmt.Fprintf(out, "etag:   %s\n", info.ETag)
		fmt.Fprintf(out, "sha256: %s\n", info.SHA256)
		fmt.Fprintf(out, "type:   %s\n", info.ContentType)
		fmt.Fprintf(out, "mtime:  %s\n", info.ModTime.Local().Format(time.RFC3339Nano))
		if info.Mode != 0 {
			fmt.Fprintf(out, "mode:   %04o\n", info.Mode)
		}
		return nil
	}
	return cmd
}

func newRmCmd() *cobra.Command {
	var recursive, quiet bool
	cmd := &cobra.Command{
		Use:   "rm BUCKET/PATH... [-r]",
		Short: "Delete files or empty directories (-r: a directory and everything below it)",
		Args:  cobra.MinimumNArgs(1),
	}
	cf := addClientFlags(cmd)
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "delete directories and their contents (files first, then directories deepest first)")
	addQuietFlag(cmd, &quiet)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c := cf.client()
		for _, arg := range args {
			bucket, p, err := parseRemote(arg)
			if err != nil {
				return err
			}
			if !recursive {
				if strings.Trim(p, "/") == "" {
					return fmt.Errorf("%s: give a path inside the bucket (use -r to empty the bucket, cairn bucket delete to remove it)", arg)
				}
				if err := c.Delete(cmd.Context(), bucket, p); err != nil {
					if errors.Is(err, client.ErrConflict) {
						return fmt.Errorf("%s is a non-empty directory (use -r)", arg)
					}
					return err
				}
				if !quiet {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %s/%s\n", bucket, strings.Trim(p, "/"))
				}
				continue
			}
			files, dirs, err := c.RemoveAll(cmd.Context(), bucket, p)
			if err != nil {
				return fmt.Errorf("%w (deleted %d files, %d directories before that)", err, files, dirs)
			}
			if !quiet {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: deleted %d files, %d directories\n", arg, files, dirs)
			}
		}
		return nil
	}
	return cmd
}
