package gcp

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gantry-dev/gantry/provisioner"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
)

// capacityCodes in a failed operation mean the zone cannot take the
// machine now.
var capacityCodes = []string{"ZONE_RESOURCE_POOL_EXHAUSTED", "QUOTA_EXCEEDED", "RESOURCE_POOL_EXHAUSTED", "does not have enough resources"}

func httpStatus(err error) int {
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		return ae.HTTPCode()
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

func isStatus(err error, status int) bool { return httpStatus(err) == status }

// classify types a Compute Engine error.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, code := range capacityCodes {
		if strings.Contains(msg, code) {
			return &provisioner.Error{Kind: provisioner.KindInsufficientCapacity, Op: op, Err: err}
		}
	}
	kind := provisioner.KindTransport
	switch status := httpStatus(err); {
	case status == http.StatusNotFound:
		kind = provisioner.KindNotFound
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		kind = provisioner.KindAuth
	case status == http.StatusBadRequest:
		kind = provisioner.KindInvalid
	}
	return &provisioner.Error{Kind: kind, Op: op, Err: err}
}
