package csi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/version"
)

// DriverName is the CSI driver's name (the StorageClass's provisioner).
const DriverName = "csi.cairn-fs.io"

// Volume parameters (a StorageClass's parameters, or a PersistentVolume's
// volumeAttributes).
const (
	// ParamBucket names the bucket volumes live in (required).
	ParamBucket = "bucket"
	// ParamPrefix is the directory under which CreateVolume makes each
	// volume's directory (default: the bucket's root).
	ParamPrefix = "prefix"
)

// Config configures a Driver.
type Config struct {
	// Endpoint is where the gRPC server listens: unix:///PATH (or a bare
	// path).
	Endpoint string
	// NodeID is this host's name (NodeGetInfo).
	NodeID string
	// Client reaches a Cairn node with the admin key (controller: making
	// and removing volumes' directories).
	Client *client.Client
	// MountRoot is where this host's Cairn node mounts buckets: bucket B
	// at MountRoot/B (cairn server --mount B:MountRoot/B). A volume is
	// published by bind-mounting its directory there onto the pod's target.
	MountRoot string
	Logger    *slog.Logger
}

// Driver is the CSI driver: identity, controller and node services.
type Driver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedControllerServer
	csipb.UnimplementedNodeServer

	cfg Config
	srv *grpc.Server
	ln  net.Listener

	mu sync.Mutex // serializes node publishes and unpublishes
}

// New returns a driver (not serving yet).
func New(cfg Config) (*Driver, error) {
	switch {
	case cfg.Endpoint == "":
		return nil, errors.New("csi: an endpoint (unix:///PATH) is needed")
	case cfg.NodeID == "":
		return nil, errors.New("csi: a node ID is needed")
	case cfg.Client == nil:
		return nil, errors.New("csi: a client of a Cairn node is needed")
	case cfg.MountRoot == "":
		return nil, errors.New("csi: the mount root (where this host's node mounts buckets) is needed")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Driver{cfg: cfg}, nil
}

// Listen opens the endpoint (a stale socket file is removed first).
func (d *Driver) Listen() error {
	p := d.cfg.Endpoint
	if u, err := url.Parse(p); err == nil && u.Scheme == "unix" {
		p = u.Path
		if p == "" {
			p = u.Opaque
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return fmt.Errorf("csi: %w", err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("csi: %w", err)
	}
	ln, err := net.Listen("unix", p)
	if err != nil {
		return fmt.Errorf("csi: %w", err)
	}
	d.ln = ln
	d.srv = grpc.NewServer(grpc.UnaryInterceptor(d.logCalls))
	csipb.RegisterIdentityServer(d.srv, d)
	csipb.RegisterControllerServer(d.srv, d)
	csipb.RegisterNodeServer(d.srv, d)
	return nil
}

// Serve answers calls until Stop.
func (d *Driver) Serve() error { return d.srv.Serve(d.ln) }

// Stop stops the server.
func (d *Driver) Stop() { d.srv.Stop() }

func (d *Driver) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil {
		d.cfg.Logger.Info("csi call failed", "method", info.FullMethod, "err", err)
	} else {
		d.cfg.Logger.Debug("csi call", "method", info.FullMethod)
	}
	return resp, err
}

// --- identity ---

func (d *Driver) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	v := version.Get().Release
	if v == "" {
		v = "dev"
	}
	return &csipb.GetPluginInfoResponse{Name: DriverName, VendorVersion: v}, nil
}

func (d *Driver) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	return &csipb.GetPluginCapabilitiesResponse{Capabilities: []*csipb.PluginCapability{{
		Type: &csipb.PluginCapability_Service_{Service: &csipb.PluginCapability_Service{Type: csipb.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

func (d *Driver) Probe(ctx context.Context, _ *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{}, nil
}

// --- volumes ---

// volumeID names a volume: BUCKET/DIR (DIR: the volume's directory in the
// bucket, "" for the whole bucket).
func volumeID(bucket, dir string) string { return bucket + "/" + dir }

// parseVolumeID splits a volume ID into its bucket (a valid bucket name)
// and directory (relative, no "." or ".." element); anything else is not
// a Cairn volume ID (NotFound, as csi-sanity expects of a volume that
// does not exist).
func parseVolumeID(id string) (bucket, dir string, err error) {
	bucket, dir, _ = strings.Cut(id, "/")
	bad := meta.ValidBucketName(bucket) != nil || strings.HasPrefix(dir, "/")
	for _, el := range strings.Split(dir, "/") {
		bad = bad || el == "." || el == ".."
	}
	if bad {
		return "", "", status.Errorf(codes.NotFound, "volume %q: not a Cairn volume ID (BUCKET/DIR)", id)
	}
	return bucket, strings.Trim(dir, "/"), nil
}

// checkCapabilities accepts mount volumes of any access mode (a Cairn
// volume is a shared file tree: single or many nodes, reading or
// writing); block volumes are refused.
func checkCapabilities(caps []*csipb.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	for _, c := range caps {
		if c.GetBlock() != nil {
			return status.Error(codes.InvalidArgument, "block volumes are not supported: a Cairn volume is a file tree (use a mount volume)")
		}
		if c.GetMount() == nil {
			return status.Error(codes.InvalidArgument, "a mount capability is required")
		}
		if c.GetAccessMode() == nil || c.GetAccessMode().GetMode() == csipb.VolumeCapability_AccessMode_UNKNOWN {
			return status.Error(codes.InvalidArgument, "an access mode is required")
		}
	}
	return nil
}

func clientCode(err error) codes.Code {
	switch {
	case errors.Is(err, client.ErrNotFound):
		return codes.NotFound
	case errors.Is(err, client.ErrInvalidArgument), errors.Is(err, client.ErrBadRequest):
		return codes.InvalidArgument
	case errors.Is(err, client.ErrUnauthorized), errors.Is(err, client.ErrForbidden):
		return codes.PermissionDenied
	case errors.Is(err, client.ErrConflict):
		return codes.AlreadyExists
	}
	return codes.Unavailable
}

// --- controller ---

func (d *Driver) ControllerGetCapabilities(context.Context, *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	return &csipb.ControllerGetCapabilitiesResponse{Capabilities: []*csipb.ControllerServiceCapability{{
		Type: &csipb.ControllerServiceCapability_Rpc{Rpc: &csipb.ControllerServiceCapability_RPC{Type: csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
	}}}, nil
}

// CreateVolume makes the volume's directory, PREFIX/NAME in the bucket of
// the parameters (idempotent: an existing directory is the volume).
func (d *Driver) CreateVolume(ctx context.Context, req *csipb.CreateVolumeRequest) (*csipb.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume name is required")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volumes from snapshots or clones are not supported")
	}
	p := req.GetParameters()
	bucket := p[ParamBucket]
	if bucket == "" {
		return nil, status.Errorf(codes.InvalidArgument, "parameter %q (the bucket volumes live in) is required", ParamBucket)
	}
	if err := meta.ValidBucketName(bucket); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "parameter %q: %v", ParamBucket, err)
	}
	if strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return nil, status.Errorf(codes.InvalidArgument, "volume name %q: no slashes", name)
	}
	prefix := strings.Trim(p[ParamPrefix], "/")
	for _, el := range strings.Split(prefix, "/") {
		if el == "." || el == ".." {
			return nil, status.Errorf(codes.InvalidArgument, "parameter %q: %q has a %q element", ParamPrefix, prefix, el)
		}
	}
	dir := path.Join(prefix, name)
	want := req.GetCapacityRange().GetRequiredBytes()
	// The capacity asked for is kept beside the volume (a file tree has
	// no size of its own): a second request under the same name must ask
	// for the same (idempotent), else it names another volume.
	rec := recordPath(dir)
	if rc, _, err := d.cfg.Client.Get(ctx, bucket, rec); err == nil {
		b, rerr := io.ReadAll(io.LimitReader(rc, 64))
		rc.Close()
		if rerr == nil && strings.TrimSpace(string(b)) != strconv.FormatInt(want, 10) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with a capacity of %s bytes, not %d", name, strings.TrimSpace(string(b)), want)
		}
	} else if !errors.Is(err, client.ErrNotFound) {
		return nil, status.Errorf(clientCode(err), "create volume %s: %v", name, err)
	}
	if err := d.cfg.Client.Mkdir(ctx, bucket, dir); err != nil && !errors.Is(err, client.ErrConflict) {
		return nil, status.Errorf(clientCode(err), "create volume %s: %v", name, err)
	}
	body := strconv.FormatInt(want, 10)
	if _, err := d.cfg.Client.Put(ctx, bucket, rec, strings.NewReader(body), int64(len(body)), client.PutOptions{}); err != nil {
		return nil, status.Errorf(clientCode(err), "create volume %s: record its capacity: %v", name, err)
	}
	// A RWX file tree has no size: the capacity asked for is recorded.
	return &csipb.CreateVolumeResponse{Volume: &csipb.Volume{VolumeId: volumeID(bucket, dir),
		CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
		VolumeContext: map[string]string{ParamBucket: bucket, "dir": dir}}}, nil
}

// DeleteVolume removes the volume's directory and everything in it (into
// the bucket's trash when the bucket keeps one). A missing volume is
// already deleted.
func (d *Driver) DeleteVolume(ctx context.Context, req *csipb.DeleteVolumeRequest) (*csipb.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume ID is required")
	}
	bucket, dir, err := parseVolumeID(id)
	if err != nil || dir == "" {
		return &csipb.DeleteVolumeResponse{}, nil // not one CreateVolume made: nothing to delete
	}
	if err := d.removeTree(ctx, bucket, dir); err != nil && !errors.Is(err, client.ErrNotFound) {
		return nil, status.Errorf(clientCode(err), "delete volume %s: %v", id, err)
	}
	if err := d.cfg.Client.Delete(ctx, bucket, recordPath(dir)); err != nil && !errors.Is(err, client.ErrNotFound) {
		return nil, status.Errorf(clientCode(err), "delete volume %s: %v", id, err)
	}
	return &csipb.DeleteVolumeResponse{}, nil
}

// recordPath is where the capacity a volume was created with is kept:
// PREFIX/.cairn-csi/NAME, beside the volume's directory PREFIX/NAME, out
// of the pods' sight.
func recordPath(dir string) string {
	return path.Join(path.Dir(dir), ".cairn-csi", path.Base(dir))
}

// removeTree deletes every file under bucket/dir, then the directories,
// deepest first, then dir.
func (d *Driver) removeTree(ctx context.Context, bucket, dir string) error {
	var dirs []string
	err := d.cfg.Client.ListPages(ctx, bucket, dir, client.ListOptions{Recursive: true}, func(p client.ListResult) error {
		for _, e := range p.Entries {
			if e.IsDir {
				dirs = append(dirs, e.Path)
				continue
			}
			if err := d.cfg.Client.Delete(ctx, bucket, e.Path); err != nil && !errors.Is(err, client.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := d.cfg.Client.Delete(ctx, bucket, dirs[i]+"/"); err != nil && !errors.Is(err, client.ErrNotFound) {
			return err
		}
	}
	return d.cfg.Client.Delete(ctx, bucket, dir+"/")
}

func (d *Driver) ValidateVolumeCapabilities(ctx context.Context, req *csipb.ValidateVolumeCapabilitiesRequest) (*csipb.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume ID is required")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	bucket, dir, err := parseVolumeID(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if _, err := d.cfg.Client.Stat(ctx, bucket, dir); err != nil {
		return nil, status.Errorf(clientCode(err), "volume %s: %v", req.GetVolumeId(), err)
	}
	return &csipb.ValidateVolumeCapabilitiesResponse{Confirmed: &csipb.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities(), VolumeContext: req.GetVolumeContext(), Parameters: req.GetParameters()}}, nil
}

// --- node ---

func (d *Driver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: d.cfg.NodeID}, nil
}

func (d *Driver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return &csipb.NodeGetCapabilitiesResponse{}, nil
}

// NodePublishVolume bind-mounts the volume's directory in this host's
// mount of its bucket (MountRoot/BUCKET/DIR) onto the pod's target path:
// read-only when asked, or when the access mode only reads; with the
// capability's mount flags (ro, nosuid, nodev, noexec, noatime, nodiratime,
// relatime; any other is refused). MountRoot/BUCKET must be a live FUSE
// mount (else the pod would get the host's empty directory), and DIR is
// opened beneath it with no symbolic link followed, so that nothing a
// bucket's writer can do makes a publish expose anything outside the
// volume. Publishing again to the same target is a success if it is the
// same volume with the same read-only flag, else AlreadyExists.
func (d *Driver) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	if err := checkTarget(id, target); err != nil {
		return nil, err
	}
	capab := req.GetVolumeCapability()
	if capab == nil {
		return nil, status.Error(codes.InvalidArgument, "a volume capability is required")
	}
	if err := checkCapabilities([]*csipb.VolumeCapability{capab}); err != nil {
		return nil, err
	}
	bucket, dir, err := parseVolumeID(id)
	if err != nil {
		return nil, err
	}
	flags, err := bindFlags(capab.GetMount().GetMountFlags())
	if err != nil {
		return nil, err
	}
	switch capab.GetAccessMode().GetMode() {
	case csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
		flags |= unix.MS_RDONLY
	}
	if req.GetReadonly() {
		flags |= unix.MS_RDONLY
	}
	// Opened before taking the lock: a hung mount of one bucket holds up
	// this call only, not the others'.
	fd, err := d.openVolume(id, bucket, dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "target %s: %v", target, err)
	}
	real, err := resolveTarget(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "target %s: %v", target, err)
	}
	if m, ok := mountAt(real); ok {
		if same, err := sameDir(fd, real); err != nil || !same || m.readOnly != (flags&unix.MS_RDONLY != 0) {
			return nil, status.Errorf(codes.AlreadyExists, "target %s: another volume, or this one with another read-only flag, is published there", target)
		}
		return &csipb.NodePublishVolumeResponse{}, nil
	}
	// The bind's source is the directory opened beneath the bucket's
	// mount, through its descriptor: no path is looked up again.
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(src, real, "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind %s on %s: %v", filepath.Join(d.cfg.MountRoot, bucket, dir), target, err)
	}
	if flags != 0 {
		if err := unix.Mount("", real, "", unix.MS_BIND|unix.MS_REMOUNT|flags, ""); err != nil {
			unix.Unmount(real, unix.MNT_DETACH)
			return nil, status.Errorf(codes.Internal, "remount of %s with its flags: %v", target, err)
		}
	}
	d.cfg.Logger.Info("volume published", "volume", id, "target", target, "readonly", flags&unix.MS_RDONLY != 0)
	return &csipb.NodePublishVolumeResponse{}, nil
}

// fuseSuperMagic is statfs's f_type of a FUSE file system.
const fuseSuperMagic = 0x65735546

// openVolume opens (O_PATH) the directory dir of bucket in this host's
// mount of it: MountRoot/BUCKET must be a FUSE mount, and dir is resolved
// beneath it without following any symbolic link (openat2's
// RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS).
func (d *Driver) openVolume(id, bucket, dir string) (int, error) {
	root := filepath.Join(d.cfg.MountRoot, bucket)
	var sfs unix.Statfs_t
	if err := unix.Statfs(root, &sfs); err != nil || sfs.Type != fuseSuperMagic {
		return -1, status.Errorf(codes.Unavailable, "volume %s: bucket %s is not mounted on %s (is this host's Cairn node running with --mount %s:%s?)",
			id, bucket, root, bucket, root)
	}
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, status.Errorf(codes.Unavailable, "volume %s: %s: %v", id, root, err)
	}
	defer unix.Close(rfd)
	rel := filepath.FromSlash(dir)
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return -1, status.Errorf(codes.NotFound, "volume %s: no directory %s in this host's mount of bucket %s", id, dir, bucket)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return -1, status.Errorf(codes.InvalidArgument, "volume %s: %s has a symbolic link on its way: refused (it could lead out of the volume)", id, dir)
	}
	return -1, status.Errorf(codes.Internal, "volume %s: open %s in %s: %v", id, dir, root, err)
}

// bindFlags maps a capability's mount flags to a bind mount's; a flag a
// bind mount cannot honour is refused rather than ignored.
func bindFlags(opts []string) (uintptr, error) {
	var f uintptr
	for _, o := range opts {
		for _, o := range strings.Split(o, ",") {
			switch strings.TrimSpace(o) {
			case "", "rw", "defaults":
			case "ro":
				f |= unix.MS_RDONLY
			case "nosuid":
				f |= unix.MS_NOSUID
			case "nodev":
				f |= unix.MS_NODEV
			case "noexec":
				f |= unix.MS_NOEXEC
			case "noatime":
				f |= unix.MS_NOATIME
			case "nodiratime":
				f |= unix.MS_NODIRATIME
			case "relatime":
				f |= unix.MS_RELATIME
			default:
				return 0, status.Errorf(codes.InvalidArgument, "mount flag %q: a Cairn volume is a bind of the host's mount and takes only ro, rw, nosuid, nodev, noexec, noatime, nodiratime, relatime", o)
			}
		}
	}
	return f, nil
}

// resolveTarget resolves the symbolic links on the way to target (its
// parent's path; mountinfo lists resolved paths, and a target reached
// through a link must be looked up as such, or each publish would stack
// a mount). The target itself is not looked at: it may be a mount of a
// hung or aborted FUSE connection.
func resolveTarget(target string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(target))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(target)), nil
}

// sameDir reports whether the directory mounted at p is the one fd names
// (the same device and inode).
func sameDir(fd int, p string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		return false, err
	}
	if err := unix.Stat(p, &b); err != nil {
		return false, err
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// NodeUnpublishVolume unmounts the target path and removes it; nothing is
// left mounted. An unpublished target is a success.
func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	if err := checkTarget(id, target); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	real := target
	if r, err := resolveTarget(target); err == nil {
		real = r
	}
	for mounted(real) {
		if err := unix.Unmount(real, 0); err != nil {
			if err := unix.Unmount(real, unix.MNT_DETACH); err != nil {
				return nil, status.Errorf(codes.Internal, "unmount %s: %v", target, err)
			}
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "remove %s: %v", target, err)
	}
	d.cfg.Logger.Info("volume unpublished", "volume", id, "target", target)
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// checkTarget checks the volume ID and target path a node call needs.
func checkTarget(id, target string) error {
	switch {
	case id == "":
		return status.Error(codes.InvalidArgument, "a volume ID is required")
	case target == "":
		return status.Error(codes.InvalidArgument, "a target path is required")
	}
	return nil
}

// mountInfo is what mountAt reports of a mount.
type mountInfo struct{ readOnly bool }

// mountAt reports the topmost mount on p (a resolved path), from
// /proc/self/mountinfo: whether p is a mount point, and its per-mount
// read-only flag.
func mountAt(p string) (mountInfo, bool) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return mountInfo{}, false
	}
	clean := filepath.Clean(p)
	var m mountInfo
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && unescapeMount(f[4]) == clean {
			// Later lines are mounts made later: the last one is on top.
			m, found = mountInfo{readOnly: slices.Contains(strings.Split(f[5], ","), "ro")}, true
		}
	}
	return m, found
}

// mounted reports whether p (a resolved path) is a mount point.
func mounted(p string) bool {
	_, ok := mountAt(p)
	return ok
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
