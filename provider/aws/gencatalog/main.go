// Command gencatalog writes provider/aws/awscatalog/catalog.json from the output of
// `aws ec2 describe-instance-types --output json` and a price file
// ({"region": ..., "onDemandPerHour": {type: USD}}):
//
//	go run ./provider/aws/gencatalog \
//	  -types provider/aws/catalogdata/instance-types.json \
//	  -prices provider/aws/catalogdata/prices-us-east-1.json \
//	  -out provider/aws/awscatalog/catalog.json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/gantry-dev/gantry/provider/aws/awscatalog"
)

func main() {
	typesPath := flag.String("types", "provider/aws/catalogdata/instance-types.json", "describe-instance-types output")
	pricesPath := flag.String("prices", "provider/aws/catalogdata/prices-us-east-1.json", "on-demand prices")
	out := flag.String("out", "provider/aws/awscatalog/catalog.json", "catalog to write")
	flag.Parse()
	if err := run(*typesPath, *pricesPath, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gencatalog:", err)
		os.Exit(1)
	}
}

func run(typesPath, pricesPath, out string) error {
	var types awscatalog.DescribedTypes
	if err := readJSON(typesPath, &types); err != nil {
		return err
	}
	var prices awscatalog.Prices
	if err := readJSON(pricesPath, &prices); err != nil {
		return err
	}
	catalog, skipped := awscatalog.BuildCatalog(types, prices)
	for _, name := range skipped {
		fmt.Fprintf(os.Stderr, "gencatalog: %s has no price in %s; left out\n", name, pricesPath)
	}
	data, err := json.MarshalIndent(catalog, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(data, '\n'), 0o644)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
