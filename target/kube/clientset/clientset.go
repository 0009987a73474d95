// Package clientset holds the typed clients of the Kubernetes API groups
// Gantry calls: core (Pods, Services, Secrets, Namespaces, Nodes), node
// (RuntimeClasses) and scheduling (PriorityClasses), and the informers it
// runs over them.
//
// They are client-go's typed clients and cache; client-go's generated
// whole clientset and informer factory are not linked: they bring every
// API group's client, informer and lister, which was most of Gantry's
// build time.
package clientset

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	nodev1client "k8s.io/client-go/kubernetes/typed/node/v1"
	schedulingv1client "k8s.io/client-go/kubernetes/typed/scheduling/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is the subset of client-go's kubernetes.Interface Gantry
// uses; a kubernetes.Clientset satisfies it too.
type Interface interface {
	CoreV1() corev1client.CoreV1Interface
	NodeV1() nodev1client.NodeV1Interface
	SchedulingV1() schedulingv1client.SchedulingV1Interface
}

type clients struct {
	core       *corev1client.CoreV1Client
	node       *nodev1client.NodeV1Client
	scheduling *schedulingv1client.SchedulingV1Client
}

func (c *clients) CoreV1() corev1client.CoreV1Interface { return c.core }
func (c *clients) NodeV1() nodev1client.NodeV1Interface { return c.node }
func (c *clients) SchedulingV1() schedulingv1client.SchedulingV1Interface {
	return c.scheduling
}

// New makes the clients of one API server; they share its HTTP client
// (one connection pool, one rate limiter), as a generated clientset's do.
func New(rc *rest.Config) (Interface, error) {
	rc = rest.CopyConfig(rc)
	if rc.UserAgent == "" {
		rc.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if rc.RateLimiter == nil && rc.QPS > 0 {
		if rc.Burst <= 0 {
			return nil, fmt.Errorf("kubernetes client: a QPS of %v needs a burst above 0", rc.QPS)
		}
		// One limiter for every group, as kubernetes.NewForConfig makes.
		rc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(rc.QPS, rc.Burst)
	}
	c := &clients{}
	if c.core, err = corev1client.NewForConfigAndClient(rc, httpClient); err != nil {
		return nil, fmt.Errorf("kubernetes core/v1 client: %w", err)
	}
	if c.node, err = nodev1client.NewForConfigAndClient(rc, httpClient); err != nil {
		return nil, fmt.Errorf("kubernetes node/v1 client: %w", err)
	}
	if c.scheduling, err = schedulingv1client.NewForConfigAndClient(rc, httpClient); err != nil {
		return nil, fmt.Errorf("kubernetes scheduling/v1 client: %w", err)
	}
	return c, nil
}

// Informer keeps a cache of one kind of object, listed and watched
// through a typed client's REST client (namespace "" for all; options
// may narrow the list, e.g. by label).
func Informer(c rest.Interface, resource, namespace string, example runtime.Object, resync time.Duration, options func(*metav1.ListOptions)) cache.SharedIndexInformer {
	if options == nil {
		options = func(*metav1.ListOptions) {}
	}
	lw := cache.NewFilteredListWatchFromClient(c, resource, namespace, options)
	return cache.NewSharedIndexInformer(lw, example, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}
