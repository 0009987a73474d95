package aws

import (
	"errors"
	"sort"

	"github.com/aws/smithy-go"
	"github.com/gantry-dev/gantry/provisioner"
)

// errorKinds maps EC2 error codes to what the fleet does about them.
var errorKinds = map[string]provisioner.ErrorKind{
	"InsufficientInstanceCapacity": provisioner.KindInsufficientCapacity,
	"InsufficientCapacity":         provisioner.KindInsufficientCapacity,
	"SpotMaxPriceTooLow":           provisioner.KindInsufficientCapacity,
	"MaxSpotInstanceCountExceeded": provisioner.KindInsufficientCapacity,
	"InstanceLimitExceeded":        provisioner.KindInsufficientCapacity,
	"Unsupported":                  provisioner.KindInsufficientCapacity,
	"UnauthorizedOperation":        provisioner.KindAuth,
	"AuthFailure":                  provisioner.KindAuth,
	"InvalidClientTokenId":         provisioner.KindAuth,
	"SignatureDoesNotMatch":        provisioner.KindAuth,
	"ExpiredToken":                 provisioner.KindAuth,
	"InvalidInstanceID.NotFound":   provisioner.KindNotFound,
	"RequestLimitExceeded":         provisioner.KindTransport,
	"Throttling":                   provisioner.KindTransport,
	"InternalError":                provisioner.KindTransport,
	"Unavailable":                  provisioner.KindTransport,
	"InvalidParameterValue":        provisioner.KindInvalid,
	"InvalidParameterCombination":  provisioner.KindInvalid,
	"MissingParameter":             provisioner.KindInvalid,
	"InvalidAMIID.NotFound":        provisioner.KindInvalid,
	"InvalidAMIID.Malformed":       provisioner.KindInvalid,
	"InvalidSubnetID.NotFound":     provisioner.KindInvalid,
	"InvalidGroup.NotFound":        provisioner.KindInvalid,
	"InvalidInstanceID.Malformed":  provisioner.KindNotFound,
	"IncorrectInstanceState":       provisioner.KindInvalid,
}

// classify types an SDK error by its EC2 error code (transport when it has
// none: the SDK already retried throttling and transient failures).
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if kind, ok := errorKinds[apiCode(err)]; ok {
		return &provisioner.Error{Kind: kind, Op: op, Err: err}
	}
	return &provisioner.Error{Kind: provisioner.KindTransport, Op: op, Err: err}
}

// apiCode is an EC2 error's code ("" for none).
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
