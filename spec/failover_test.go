package spec

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

const baseGroup = `kind: FailoverGroup
metadata: {name: pg}
spec:
  primary: {cluster: east}
  replica: {cluster: west}
  capability: {name: postgres, postgres: {synchronous: true, passwordEnv: PGPASS}}
  template:
    ports: [{name: postgres}]
    env:
      - name: PGPASS
        secretRef: {name: pg, key: password}
    resources: {cpu: 500m, memory: 512Mi}
`

func TestFailoverGroupExpandsIntoTwoMemberServices(t *testing.T) {
	docs, err := Parse("pg.yaml", []byte(baseGroup), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := docs[0].FailoverGroup
	if g == nil || g.Spec.LeaseSeconds != DefaultLeaseSeconds || g.Spec.Mode != api.FailoverAutomatic || g.Spec.Capability.Postgres.BinDir != DefaultPostgresBinDir {
		t.Fatalf("defaults: %+v", g)
	}
	members := FailoverMembers(g)
	if len(members) != 2 || members[0].Metadata.Name != "pg-east" || members[1].Metadata.Name != "pg-west" {
		t.Fatalf("members %v", members)
	}
	for i, m := range members {
		sp := m.Spec
		home := []string{"primary", "replica"}[i]
		switch {
		case sp.Failover == nil || sp.Failover.Group != "pg" || sp.Failover.Home != home:
			t.Errorf("%s: failover %+v", m.Metadata.Name, sp.Failover)
		case strings.Join(sp.Command, " ") != "gantry member --":
			t.Errorf("%s: command %v", m.Metadata.Name, sp.Command)
		case sp.DesiredReplicas() != 1 || sp.Update.Surge() != 0 || sp.Update.Unavailable() != 1:
			t.Errorf("%s: one replica, replaced in place: %+v", m.Metadata.Name, sp.Update)
		case sp.HealthCheck == nil || sp.HealthCheck.TCP == nil || sp.HealthCheck.FailureThreshold != DefaultFailoverFailures || sp.HealthCheck.SuccessThreshold != DefaultFailoverSuccesses:
			t.Errorf("%s: health check from the group's thresholds: %+v", m.Metadata.Name, sp.HealthCheck)
		case sp.SecretEnv["PGPASS"].Name != "pg":
			t.Errorf("%s: secret env %+v", m.Metadata.Name, sp.SecretEnv)
		}
	}
}

func TestBadFailoverGroupsNameTheirField(t *testing.T) {
	cases := []struct{ name, from, to, field string }{
		{"one cluster for both", "replica: {cluster: west}", "replica: {cluster: east}", "spec.replica.cluster"},
		{"no capability", "capability: {name: postgres, postgres: {synchronous: true, passwordEnv: PGPASS}}", "capability: {}", "spec.capability.name"},
		{"unknown capability", "name: postgres, postgres", "name: mysql, postgres", "spec.capability.name"},
		{"postgres runs itself", "ports: [{name: postgres}]", "ports: [{name: postgres}]\n    command: [postgres]", "spec.template.command"},
		{"two replicas a side", "resources: {cpu: 500m", "replicas: 2\n    resources: {cpu: 500m", "spec.template.replicas"},
		{"cluster in the template", "resources: {cpu: 500m", "cluster: east\n    resources: {cpu: 500m", "spec.template.cluster"},
		{"password env not in the template", "passwordEnv: PGPASS", "passwordEnv: NOPE", "spec.capability.postgres.passwordEnv"},
		{"bad template field", "resources: {cpu: 500m", "resources: {cpu: lots", "spec.template.resources.cpu"},
		{"bad mode", "template:", "mode: sometimes\n  template:", "spec.mode"},
		{"generic without promote", "name: postgres, postgres: {synchronous: true, passwordEnv: PGPASS}", "name: generic, generic: {demote: [x]}", "spec.capability.generic.promote"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := strings.Replace(baseGroup, c.from, c.to, 1)
			if doc == baseGroup {
				t.Fatalf("case does not change the spec")
			}
			_, err := Parse("pg.yaml", []byte(doc), nil)
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("want an error naming %s, got %v", c.field, err)
			}
		})
	}
}

func TestServicesCannotClaimToBeMembers(t *testing.T) {
	doc := baseCluster + "---\n" + baseService + "  failover: {group: pg, home: primary}\n"
	if _, err := Parse("web.yaml", []byte(doc), testCatalogs); err == nil || !strings.Contains(err.Error(), "spec.failover") {
		t.Fatalf("want spec.failover refused, got %v", err)
	}
	clash := baseGroup + "---\n" + strings.Replace(strings.Replace(baseService, "name: web", "name: pg-east", 1), "cluster: dev", "cluster: east", 1)
	if _, err := Parse("pg.yaml", []byte(clash), nil); err == nil || !strings.Contains(err.Error(), `the group's service "pg-east" is taken`) {
		t.Fatalf("want the member name clash named, got %v", err)
	}
}
