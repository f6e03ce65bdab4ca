package deps

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// helmVersion is the Helm the chart test renders with (go run fetches it
// from the module proxy: nothing installed, nothing vendored).
const helmVersion = "helm.sh/helm/v3/cmd/helm@v3.22.0"

// TestHelmChart renders deploy/helm/cairn with `helm template` and checks
// that every manifest parses and that the objects and settings are the
// ones docs/kubernetes.md describes: the data nodes' StatefulSet (replicas,
// volumes, probes on /_cairn/health, Prometheus annotations, the secret
// from a Secret, the join through the headless service), the services,
// the CSI driver's DaemonSet (a client node and the driver's node
// service), its controller, the CSIDriver and the StorageClass.
func TestHelmChart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds helm (a minute the first time)")
	}
	root := filepath.Join(repoRoot(t), "deploy", "helm", "cairn")
	dir, cache, config := t.TempDir(), t.TempDir(), t.TempDir()
	template := func(set ...string) ([]byte, string, error) {
		args := []string{"run", helmVersion, "template", "site", root, "--namespace", "web"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = dir // outside this module: go run builds helm on its own
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "HELM_CACHE_HOME="+cache, "HELM_CONFIG_HOME="+config)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return out, stderr.String(), err
	}
	out, stderr, err := template("nodes.replicas=5", "nodes.voters=5", "nodes.storage.size=200Gi",
		"secret.existingSecret=cairn-keys", "csi.buckets={web,uploads}", "csi.storageClass.bucket=uploads")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr)
	}
	// A StorageClass whose bucket the client nodes do not mount is refused
	// at render time: none of its volumes could be published.
	if _, stderr, err := template("csi.storageClass.bucket=uploads"); err == nil || !strings.Contains(stderr, `csi.storageClass.bucket "uploads" is not in csi.buckets`) {
		t.Errorf("a StorageClass bucket the clients do not mount: %v\n%s", err, stderr)
	}
	type obj = map[string]any
	objs := map[string]obj{} // kind/name
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o obj
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("a manifest does not parse: %v", err)
		}
		if o == nil {
			continue
		}
		md, _ := o["metadata"].(obj)
		objs[o["kind"].(string)+"/"+md["name"].(string)] = o
	}
	var names []string
	for k := range objs {
		names = append(names, k)
	}
	slices.Sort(names)
	want := []string{"CSIDriver/csi.cairn-fs.io", "ClusterRole/site-cairn-csi-provisioner", "ClusterRoleBinding/site-cairn-csi-provisioner",
		"DaemonSet/site-cairn-csi-node", "Deployment/site-cairn-csi-controller", "Service/site-cairn", "Service/site-cairn-headless",
		"ServiceAccount/site-cairn-csi-controller", "StatefulSet/site-cairn", "StorageClass/cairn"}
	if !slices.Equal(names, want) { // no Secret: existingSecret
		t.Fatalf("objects %v, want %v", names, want)
	}
	get := func(o any, path ...any) any {
		for _, p := range path {
			switch k := p.(type) {
			case string:
				o = o.(obj)[k]
			case int:
				o = o.([]any)[k]
			}
		}
		return o
	}
	ss := objs["StatefulSet/site-cairn"]
	if get(ss, "spec", "replicas") != 5 || get(ss, "spec", "serviceName") != "site-cairn-headless" ||
		get(ss, "spec", "volumeClaimTemplates", 0, "spec", "resources", "requests", "storage") != "200Gi" {
		t.Errorf("statefulset spec: %v", get(ss, "spec"))
	}
	pod := get(ss, "spec", "template").(obj)
	ann := get(pod, "metadata", "annotations").(obj)
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/_cairn/metrics" || ann["prometheus.io/port"] != "8080" {
		t.Errorf("scrape annotations: %v", ann)
	}
	c := get(pod, "spec", "containers", 0).(obj)
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		if get(c, probe, "httpGet", "path") != "/_cairn/health" {
			t.Errorf("%s: %v", probe, c[probe])
		}
	}
	script := get(c, "args", 0).(string)
	for _, w := range []string{"--join http://site-cairn-0.site-cairn-headless.web.svc.cluster.local:8080", "--voters 5", `if [ "$ordinal" != "0" ]`, "--advertise",
		// node 0 on an empty volume joins a live peer (1 to 4 of 5)
		`elif [ ! -e /var/lib/cairn/node.id ]`, `while [ "$i" -lt 5 ]`, `peer="http://site-cairn-$i.site-cairn-headless.${POD_NAMESPACE}.svc.cluster.local:8080"`} {
		if !strings.Contains(script, w) {
			t.Errorf("the data node's command lacks %q:\n%s", w, script)
		}
	}
	secretRefs := func(c obj) []string {
		var out []string
		for _, e := range c["env"].([]any) {
			if ref, ok := get(e, "valueFrom").(obj)["secretKeyRef"]; ok {
				out = append(out, e.(obj)["name"].(string)+"="+ref.(obj)["name"].(string)+"/"+ref.(obj)["key"].(string))
			}
		}
		return out
	}
	wantRefs := []string{"CAIRN_CLUSTER_SECRET=cairn-keys/cluster-secret", "CAIRN_ADMIN_KEY=cairn-keys/admin-key"}
	if got := secretRefs(c); !slices.Equal(got, wantRefs) {
		t.Errorf("data node secrets %v", got)
	}
	ds := objs["DaemonSet/site-cairn-csi-node"]
	var dsNames []string
	for _, x := range get(ds, "spec", "template", "spec", "containers").([]any) {
		dsNames = append(dsNames, x.(obj)["name"].(string))
	}
	if !slices.Equal(dsNames, []string{"cairn-client", "cairn-csi", "registrar"}) {
		t.Errorf("csi node containers %v", dsNames)
	}
	client := get(ds, "spec", "template", "spec", "containers", 0).(obj)
	if s := get(client, "args", 0).(string); !strings.Contains(s, "--role client") || !strings.Contains(s, "--mount web:/var/lib/cairn/mnt/web") ||
		!strings.Contains(s, "--mount uploads:/var/lib/cairn/mnt/uploads") || !strings.Contains(s, "--cache-size 1073741824") ||
		!strings.Contains(s, "--join http://site-cairn.web.svc.cluster.local:8080") {
		t.Errorf("the client node's command:\n%s", s)
	}
	// Never rolled by itself: a restart of the client cuts the pods' binds
	// of its mounts.
	if get(ds, "spec", "updateStrategy", "type") != "OnDelete" {
		t.Errorf("the csi node DaemonSet's update strategy: %v", get(ds, "spec", "updateStrategy"))
	}
	if !slices.Equal(secretRefs(client), wantRefs) {
		t.Errorf("client node secrets %v", secretRefs(client))
	}
	node := get(ds, "spec", "template", "spec", "containers", 1).(obj)
	if a := strings.Join(toStrings(node["args"]), " "); !strings.Contains(a, "--mount-root /var/lib/cairn/mnt") || !strings.Contains(a, "--endpoint unix:///csi/csi.sock") {
		t.Errorf("the csi node service's args: %s", a)
	}
	for _, m := range node["volumeMounts"].([]any) {
		if mp := m.(obj)["mountPath"]; (mp == "/var/lib/kubelet/pods" || mp == "/var/lib/cairn/mnt") && m.(obj)["mountPropagation"] != "Bidirectional" {
			t.Errorf("mount %v does not propagate to the host", mp)
		}
	}
	if d := objs["CSIDriver/csi.cairn-fs.io"]; get(d, "spec", "attachRequired") != false {
		t.Errorf("csidriver: %v", d["spec"])
	}
	sc := objs["StorageClass/cairn"]
	if sc["provisioner"] != "csi.cairn-fs.io" || get(sc, "parameters", "bucket") != "uploads" || get(sc, "parameters", "prefix") != "k8s" {
		t.Errorf("storageclass: %v", sc)
	}
	ctl := get(objs["Deployment/site-cairn-csi-controller"], "spec", "template", "spec", "containers", 1).(obj)
	if a := strings.Join(toStrings(ctl["args"]), " "); !strings.Contains(a, "--server http://site-cairn.web.svc.cluster.local:8080") {
		t.Errorf("the controller's args: %s", a)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// repoRoot is the module's root (two levels above this file).
func repoRoot(t *testing.T) string {
	_, f, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(f), "..", "..")
}
