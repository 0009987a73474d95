package kube

import (
	"errors"
	"net"
	"net/url"

	"github.com/gantry-dev/gantry/provisioner"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// classify types an API server's error like a provider's, so that callers
// react by kind: auth (401), forbidden (403), not found, conflict (409,
// already exists), invalid (422, 400), transport (no answer, 5xx,
// throttled).
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	kind := provisioner.KindTransport
	switch {
	case apierrors.IsUnauthorized(err):
		kind = provisioner.KindAuth
	case apierrors.IsForbidden(err):
		kind = provisioner.KindForbidden
	case apierrors.IsNotFound(err):
		kind = provisioner.KindNotFound
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		kind = provisioner.KindConflict
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		kind = provisioner.KindInvalid
	case isTransport(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err):
		kind = provisioner.KindTransport
	}
	return &provisioner.Error{Kind: kind, Op: op, Err: err}
}

func isTransport(err error) bool {
	var netErr net.Error
	var urlErr *url.Error
	return errors.As(err, &netErr) || errors.As(err, &urlErr)
}
