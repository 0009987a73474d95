package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/target"
	"github.com/gantry-dev/gantry/target/kube/clientset"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Desired is what one cluster must run: the Pods of its placed replicas,
// a Service for each of its services with ports, and the Kubernetes
// Secrets their Pods read (by Gantry Secret, the keys used).
type Desired struct {
	Cluster   string
	Settings  spec.KubernetesSettings
	Workloads []Workload
	Services  map[string]api.ServiceSpec
	Secrets   map[string]map[string]string
}

// Observed is a Pod's state as its replica's, and where it answers.
type Observed struct {
	Status  api.ReplicaStatus
	Pod     string
	Address string
}

// watch keeps one cluster's objects in line with what it must run: an
// informer over Gantry's Pods, Services and Secrets in its namespace and
// one over RuntimeClasses, and a loop that applies and deletes, retrying
// failed calls with backoff.
type watch struct {
	cfg    Config
	log    *slog.Logger
	clock  clock.Clock
	client clientset.Interface
	report func([]Observed) error
	notify func()
	wake   chan struct{}

	pods           corev1listers.PodLister
	services       corev1listers.ServiceLister
	secrets        corev1listers.SecretLister
	podsSynced     cache.InformerSynced
	classesSynced  cache.InformerSynced
	classes        cache.Store
	namespaceReady bool

	// cleared: the cluster must run nothing, and nothing of it is left.
	cleared atomic.Bool

	mu      sync.Mutex
	desired *Desired
	obs     target.KubernetesObservation
	// applied are the hashes of what the last successful apply of each
	// Secret, Service and PriorityClass sent.
	applied map[string]string
	// unreported are Pods' states the reporter has not taken yet, by Pod;
	// reportable wakes it.
	unreported map[string]Observed
	reportable chan struct{}
}

func newWatch(cfg Config, log *slog.Logger, clk clock.Clock, client clientset.Interface, report func([]Observed) error, notify func()) *watch {
	return &watch{cfg: cfg, log: log, clock: clk, client: client, report: report, notify: notify,
		wake: make(chan struct{}, 1), applied: map[string]string{}, unreported: map[string]Observed{}, reportable: make(chan struct{}, 1)}
}

// set hands the watch what its cluster must run now.
func (w *watch) set(d Desired) {
	w.mu.Lock()
	w.desired = &d
	w.mu.Unlock()
	w.poke()
}

func (w *watch) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watch) observation() target.KubernetesObservation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.obs
}

// run starts the informers and reconciles until ctx ends.
func (w *watch) run(ctx context.Context, d Desired) {
	w.start(ctx, d)
	backoff := time.Duration(0)
	for {
		if !w.sleep(ctx, backoff) {
			return
		}
		err := w.reconcile(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errNotSynced) {
			backoff = w.cfg.Backoff
			continue
		}
		w.recordCall(err)
		if err == nil {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, w.cfg.Backoff), w.cfg.MaxBackoff)
		w.log.Warn("kubernetes call failed; retrying", "cluster", d.Cluster, "in", backoff, "err", err)
	}
}

// sleep waits to be woken; after a failure, for the backoff to pass
// (being woken meanwhile changes nothing: what changed is reconciled at
// the retry). False when ctx ended.
func (w *watch) sleep(ctx context.Context, backoff time.Duration) bool {
	if backoff == 0 {
		select {
		case <-ctx.Done():
			return false
		case <-w.wake:
			return true
		}
	}
	t := w.clock.NewTimer(backoff)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// start runs the informers of the cluster's objects (selected by its
// label, in its namespace) and of RuntimeClasses.
func (w *watch) start(ctx context.Context, d Desired) {
	selector := labels.SelectorFromSet(labels.Set{LabelCluster: d.Cluster}).String()
	core := w.client.CoreV1().RESTClient()
	inNamespace := func(resource string, example runtime.Object) cache.SharedIndexInformer {
		return clientset.Informer(core, resource, d.Settings.Namespace, example, w.cfg.Resync,
			func(o *metav1.ListOptions) { o.LabelSelector = selector })
	}
	podInformer := inNamespace("pods", &corev1.Pod{})
	serviceInformer, secretInformer := inNamespace("services", &corev1.Service{}), inNamespace("secrets", &corev1.Secret{})
	_, _ = podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		// A Pod the informer learns of after a reconcile that did not see
		// it (one no replica wants any more) is reconciled then.
		AddFunc: func(obj any) { w.observePod(obj); w.poke() },
		// A resync hands every Pod over again: reported again, a state a
		// failed write lost is not lost for good.
		UpdateFunc: func(_, obj any) { w.observePod(obj) },
		DeleteFunc: func(any) { w.poke() },
	})
	w.onWatchError(podInformer, "list Pods")
	w.pods, w.podsSynced = corev1listers.NewPodLister(podInformer.GetIndexer()), podInformer.HasSynced
	w.services, w.secrets = corev1listers.NewServiceLister(serviceInformer.GetIndexer()), corev1listers.NewSecretLister(secretInformer.GetIndexer())
	for kind, inf := range map[string]cache.SharedIndexInformer{"service": serviceInformer, "secret": secretInformer} {
		// One deleted behind Gantry's back is applied again.
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
			if o, ok := obj.(metav1.Object); ok {
				w.forget(kind + "/" + o.GetName())
			}
		}})
	}

	classInformer := clientset.Informer(w.client.NodeV1().RESTClient(), "runtimeclasses", "", &nodev1.RuntimeClass{}, w.cfg.Resync, nil)
	_, _ = classInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.classesChanged() },
		UpdateFunc: func(any, any) {},
		DeleteFunc: func(any) { w.classesChanged() },
	})
	_ = classInformer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		w.mu.Lock()
		w.obs.ListError = classify("list RuntimeClasses", err).Error()
		w.mu.Unlock()
		w.notify()
	})
	w.classes, w.classesSynced = classInformer.GetStore(), classInformer.HasSynced
	go w.reportStates(ctx)
	for _, inf := range []cache.SharedIndexInformer{podInformer, serviceInformer, secretInformer, classInformer} {
		go inf.RunWithContext(ctx)
	}
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), classInformer.HasSynced) {
			w.classesChanged()
		}
	}()
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced, serviceInformer.HasSynced, secretInformer.HasSynced) {
			w.poke()
		}
	}()
}

func (w *watch) onWatchError(inf cache.SharedIndexInformer, op string) {
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		w.recordCall(classify(op, err))
	})
}

// forget makes the next reconcile apply an object again.
func (w *watch) forget(key string) {
	w.mu.Lock()
	delete(w.applied, key)
	w.mu.Unlock()
	w.poke()
}

// classesChanged records the RuntimeClasses the cluster has.
func (w *watch) classesChanged() {
	if !w.classesSynced() {
		return
	}
	names := map[string]bool{}
	for _, obj := range w.classes.List() {
		if rc, ok := obj.(*nodev1.RuntimeClass); ok {
			names[rc.Name] = true
		}
	}
	w.mu.Lock()
	w.obs.RuntimeClassesListed, w.obs.RuntimeClasses, w.obs.ListError = true, names, ""
	w.mu.Unlock()
	w.notify()
}

// recordCall records the outcome of the latest call; a change reaches the
// control loop (the cluster's KubernetesReady condition).
func (w *watch) recordCall(err error) {
	w.mu.Lock()
	before := w.obs.Error
	if err == nil {
		w.obs.ErrKind, w.obs.Error = "", ""
	} else {
		w.obs.ErrKind, w.obs.Error, w.obs.At = provisioner.KindOf(err), err.Error(), w.clock.Now()
	}
	changed := before != w.obs.Error
	w.mu.Unlock()
	if changed {
		w.notify()
	}
}

// observePod queues a Pod's state for the reporter: states that come in
// while it records a batch go in the next one (the latest of each Pod).
func (w *watch) observePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels[LabelReplica] == "" {
		return
	}
	hasProbe := len(pod.Spec.Containers) > 0 && pod.Spec.Containers[0].ReadinessProbe != nil
	key := pod.Namespace + "/" + pod.Name
	w.mu.Lock()
	w.unreported[key] = Observed{Status: Status(pod, hasProbe), Pod: key, Address: pod.Status.PodIP}
	w.mu.Unlock()
	select {
	case w.reportable <- struct{}{}:
	default:
	}
}

// reportStates hands the queued states to the reporter, a batch at a time,
// until ctx ends. A batch the reporter could not record goes back in the
// queue (where a newer state of the same Pod has not replaced it) and is
// tried again after a backoff.
func (w *watch) reportStates(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		if backoff > 0 {
			if !w.sleep(ctx, backoff) {
				return
			}
		} else {
			select {
			case <-ctx.Done():
				return
			case <-w.reportable:
			}
		}
		w.mu.Lock()
		batch := make([]Observed, 0, len(w.unreported))
		for _, key := range slices.Sorted(maps.Keys(w.unreported)) {
			batch = append(batch, w.unreported[key])
		}
		w.unreported = map[string]Observed{}
		w.mu.Unlock()
		if len(batch) == 0 {
			backoff = 0
			continue
		}
		err := w.report(batch)
		if err == nil {
			backoff = 0
			continue
		}
		w.log.Warn("record Pod states; will retry", "pods", len(batch), "err", err)
		w.mu.Lock()
		for _, o := range batch {
			if _, newer := w.unreported[o.Pod]; !newer {
				w.unreported[o.Pod] = o
			}
		}
		w.mu.Unlock()
		backoff = min(max(2*backoff, w.cfg.Backoff), w.cfg.MaxBackoff)
	}
}

// reconcile applies what is missing and deletes what no replica wants.
func (w *watch) reconcile(ctx context.Context) error {
	w.mu.Lock()
	d := w.desired
	w.mu.Unlock()
	if d == nil {
		return nil
	}
	if !w.podsSynced() {
		return w.probe(ctx, d)
	}
	if err := w.ensureNamespace(ctx, d.Settings); err != nil {
		return err
	}
	steps := []func(context.Context, *Desired) error{w.syncSecrets, w.syncPriorityClasses, w.syncServices, w.syncPods}
	var errs []error
	for _, step := range steps {
		if err := step(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	err := errors.Join(errs...)
	if errors.Is(err, provisioner.ErrNotFound) {
		w.namespaceReady = false // deleted behind Gantry's back
	}
	w.cleared.Store(err == nil && d.empty() && w.nothingLeft())
	return err
}

func (d *Desired) empty() bool {
	return len(d.Workloads) == 0 && len(d.Services) == 0 && len(d.Secrets) == 0
}

// nothingLeft: no Pod (but those being deleted), Service or Secret of
// the cluster is left in its namespace.
func (w *watch) nothingLeft() bool {
	pods, _ := w.pods.List(labels.Everything())
	services, _ := w.services.List(labels.Everything())
	secrets, _ := w.secrets.List(labels.Everything())
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			return false
		}
	}
	return len(services) == 0 && len(secrets) == 0
}

// probe asks the API server for what the Pod informer waits for: its
// answer says why the informer has not synced (auth, forbidden,
// unreachable). The informer's own retries say nothing to Gantry.
func (w *watch) probe(ctx context.Context, d *Desired) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	_, err := w.client.CoreV1().Pods(d.Settings.Namespace).List(ctx, metav1.ListOptions{Limit: 1,
		LabelSelector: labels.SelectorFromSet(labels.Set{LabelCluster: d.Cluster}).String()})
	if err != nil {
		return classify("list Pods in namespace "+d.Settings.Namespace, err)
	}
	return errNotSynced
}

// errNotSynced retries a reconcile that came before the informers had
// listed everything.
var errNotSynced = errors.New("waiting for the first list of Pods, Services and Secrets")

func (w *watch) ensureNamespace(ctx context.Context, s spec.KubernetesSettings) error {
	if w.namespaceReady {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	_, err := w.client.CoreV1().Namespaces().Get(ctx, s.Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = w.client.CoreV1().Namespaces().Apply(ctx, Namespace(s), metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	}
	if err != nil {
		return classify("namespace "+s.Namespace, err)
	}
	w.namespaceReady = true
	return nil
}

// applyOnce applies an object unless the same content was applied last.
func (w *watch) applyOnce(ctx context.Context, key string, obj any, apply func(context.Context) error) error {
	data, _ := json.Marshal(obj)
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	w.mu.Lock()
	done := w.applied[key] == hash
	w.mu.Unlock()
	if done {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	if err := apply(ctx); err != nil {
		return classify("apply "+key, err)
	}
	w.mu.Lock()
	w.applied[key] = hash
	w.mu.Unlock()
	return nil
}

func (w *watch) syncSecrets(ctx context.Context, d *Desired) error {
	var errs []error
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	for _, name := range slices.Sorted(maps.Keys(d.Secrets)) {
		obj := Secret(d.Cluster, name, d.Secrets[name], d.Settings)
		errs = append(errs, w.applyOnce(ctx, "secret/"+*obj.Name, obj, func(ctx context.Context) error {
			_, err := w.client.CoreV1().Secrets(d.Settings.Namespace).Apply(ctx, obj, opts)
			return err
		}))
	}
	existing, _ := w.secrets.List(labels.Everything())
	for _, s := range existing {
		if _, want := d.Secrets[trimPrefix(s.Name)]; !want {
			errs = append(errs, w.delete(ctx, "secret/"+s.Name, func(ctx context.Context) error {
				return w.client.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
			}))
		}
	}
	return errors.Join(errs...)
}

func trimPrefix(secretName string) string {
	const p = "gantry-"
	if len(secretName) > len(p) && secretName[:len(p)] == p {
		return secretName[len(p):]
	}
	return ""
}

func (w *watch) syncPriorityClasses(ctx context.Context, d *Desired) error {
	var errs []error
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	for _, wl := range d.Workloads {
		pl := wl.Spec.Placement
		if PriorityClassName(pl.Priority, pl.PreemptLowerPriority) == "" {
			continue
		}
		obj := PriorityClass(pl.Priority, pl.PreemptLowerPriority)
		errs = append(errs, w.applyOnce(ctx, "priorityclass/"+*obj.Name, obj, func(ctx context.Context) error {
			_, err := w.client.SchedulingV1().PriorityClasses().Apply(ctx, obj, opts)
			return err
		}))
	}
	return errors.Join(errs...)
}

func (w *watch) syncServices(ctx context.Context, d *Desired) error {
	var errs []error
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	for _, name := range slices.Sorted(maps.Keys(d.Services)) {
		obj := Service(d.Cluster, d.Services[name], name, d.Settings)
		errs = append(errs, w.applyOnce(ctx, "service/"+name, obj, func(ctx context.Context) error {
			_, err := w.client.CoreV1().Services(d.Settings.Namespace).Apply(ctx, obj, opts)
			return err
		}))
	}
	existing, _ := w.services.List(labels.Everything())
	for _, s := range existing {
		if _, want := d.Services[s.Name]; !want {
			errs = append(errs, w.delete(ctx, "service/"+s.Name, func(ctx context.Context) error {
				return w.client.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
			}))
		}
	}
	return errors.Join(errs...)
}

// syncPods creates the Pods of placed replicas that have none, and deletes
// Pods no replica wants (of replicas deleted or gone back to pending,
// orphans of an earlier server). A Pod is never updated: a replica's spec
// is its revision's, which never changes.
func (w *watch) syncPods(ctx context.Context, d *Desired) error {
	wanted := map[string]bool{}
	for _, wl := range d.Workloads {
		wanted[PodName(wl.Replica.ID)] = true
	}
	// Deletions first: a deployment deletes an old replica as it adds a
	// new one, and the cluster must never hold both Pods past maxSurge.
	var errs []error
	existing, _ := w.pods.List(labels.Everything())
	for _, p := range existing {
		if !wanted[p.Name] && p.DeletionTimestamp == nil {
			errs = append(errs, w.delete(ctx, "Pod "+p.Name, func(ctx context.Context) error {
				return w.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			}))
		}
	}
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	for _, wl := range d.Workloads {
		name := PodName(wl.Replica.ID)
		if _, err := w.pods.Pods(d.Settings.Namespace).Get(name); err == nil {
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
		_, err := w.client.CoreV1().Pods(d.Settings.Namespace).Apply(callCtx, Pod(wl, d.Settings), opts)
		cancel()
		if err != nil {
			errs = append(errs, classify(fmt.Sprintf("apply Pod %s of replica %s", name, wl.Replica.ID), err))
		}
	}
	return errors.Join(errs...)
}

// delete deletes an object; one already gone is deleted.
func (w *watch) delete(ctx context.Context, what string, del func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	if err := del(ctx); err != nil && !apierrors.IsNotFound(err) {
		return classify("delete "+what, err)
	}
	return nil
}
