package cli

import "github.com/spf13/cobra"

// examples are each command's Examples section, by command path; a test
// holds every command to having one (usage errors print the first).
func examples() map[string]string {
	return map[string]string{
		"gantry": `  # Everything on this host: a server, local machines, the spec applied
  gantry dev -f examples/hello.yaml

  # From another terminal in the same directory
  gantry get all`,
		"gantry agent": `  # Join a cluster with a join token (what cloud-init runs on a machine)
  GANTRY_JOIN_TOKEN=... gantry agent --server https://gantry.example.com:7400 --cluster prod --group general --data-dir /var/lib/gantry`,
		"gantry apply": `  # Apply a file, then follow the deployments it starts
  gantry apply -f web.yaml --wait

  # Every spec of a directory, from stdin too
  gantry apply -f specs/
  cat web.yaml | gantry apply -f -`,
		"gantry cordon": `  # Keep new replicas off a machine (those it runs stay)
  gantry cordon dev-general-1a2b`,
		"gantry uncordon": `  # Let a cordoned machine take replicas again
  gantry uncordon dev-general-1a2b`,
		"gantry delete": `  # Delete a service (its replicas stop)
  gantry delete service web

  # Delete one replica, as kubectl deletes a Pod: its index is made again
  gantry delete replica/web-1

  # Delete what a file declares
  gantry delete -f web.yaml`,
		"gantry describe": `  # A service with its replicas, revisions and events
  gantry describe service web

  # The form -o name prints works too
  gantry describe replica/web-0`,
		"gantry simulate": `  # Three days of demand, on demand against spot with a fallback, plotted
  gantry simulate -f examples/simulate/shop.yaml --catalog examples/catalog.json --trace examples/simulate/demand.csv \
    --policy examples/simulate/on-demand.yaml --policy examples/simulate/spot.yaml --plot simulate.svg`,
		"gantry dev": `  # Server, local machines and the spec, in one command (state in ./.gantry)
  gantry dev -f examples/hello.yaml

  # Machines as Docker containers instead of local processes
  gantry dev -f examples/hello.yaml --provider docker`,
		"gantry diff": `  # What applying would change (exit 1 when something would)
  gantry diff -f web.yaml`,
		"gantry drain": `  # Move a machine's replicas away (new copies first), then terminate it
  gantry drain dev-general-1a2b --wait`,
		"gantry exec": `  # Run a command in a replica
  gantry exec web-0 -- ls /

  # An interactive shell
  gantry exec -it web-0 -- sh`,
		"gantry explain": `  # What a field of a kind means
  gantry explain service.spec.update

  # Every field of a kind, nested
  gantry explain cluster --recursive`,
		"gantry failover": `  # Which side of a group is primary, and how each member does
  gantry failover status pg`,
		"gantry failover promote": `  # Make the replica side primary, and wait until it serves
  gantry failover promote pg --wait`,
		"gantry failover revert": `  # Hand the primary role back to the group's home side
  gantry failover revert pg --wait`,
		"gantry failover status": `  # The group's phase, epoch, primary and each member's role
  gantry failover status pg`,
		"gantry get": `  # Services, and every replica with its machine, state and URL
  gantry get services
  gantry get replicas -o wide

  # Everything, or several kinds at once
  gantry get all
  gantry get svc,rep

  # The KIND/NAME -o name prints, fed back
  gantry get replicas -o name | head -1 | xargs gantry get

  # Only some fields, or a script's view
  gantry get replicas -o custom-columns=NAME:.metadata.name,STATE:.state,URL:.url
  gantry get replicas -o jsonpath='{.items[*].metadata.name}'

  # Follow the changes
  gantry get replicas -w`,
		"gantry hello": `  # The tiny HTTP server the examples run (answers on $PORT)
  PORT=8080 gantry hello`,
		"gantry image": `  # Build the machine image the docker provider runs
  gantry image build --tag gantry:dev`,
		"gantry image build": `  # Build the machine image from this binary
  gantry image build --tag gantry:dev`,
		"gantry join-token": `  # A single-use token for one machine of a group
  gantry join-token --cluster prod --group general

  # One token for ten machines
  gantry join-token --cluster prod --group general --reusable 10`,
		"gantry logs": `  # A replica's output
  gantry logs web-0

  # Every replica of a service, each line prefixed, following
  gantry logs web -f

  # The output of the instance before the latest restart (a crash)
  gantry logs web-0 --previous`,
		"gantry member": `  # Run as a failover group's member (its agent starts it)
  GANTRY_FAILOVER_DIR=/var/lib/gantry/pg gantry member`,
		"gantry plan": `  # What the fleet would be for a spec, offline, priced
  gantry plan -f examples/hello.yaml --offline

  # The same against a running server's live state
  gantry plan -f web.yaml`,
		"gantry port-forward": `  # Reach a replica's port 8080 on localhost:9000
  gantry port-forward web-0 9000:8080

  # A service's first serving replica, at the same port here
  gantry port-forward service/web 8080`,
		"gantry rollout": `  # Follow a service's deployment
  gantry rollout status web -w`,
		"gantry rollout diff": `  # What changed from revision 2 to the current one, and between two
  gantry rollout diff web 2
  gantry rollout diff web 2 5`,
		"gantry rollout history": `  # A service's revisions, and one revision's spec
  gantry rollout history web
  gantry rollout history web --revision 3`,
		"gantry rollout pause": `  # Stop a deployment where it is (apply keeps it paused)
  gantry rollout pause web`,
		"gantry rollout promote": `  # Let a canary deployment go on to every replica
  gantry rollout promote web`,
		"gantry rollout restart": `  # Replace every replica (a new revision running the same spec)
  gantry rollout restart web`,
		"gantry rollout resume": `  # Go on with a paused deployment
  gantry rollout resume web`,
		"gantry rollout status": `  # Wait until the deployment completes, printing why a replica waits
  gantry rollout status web -w --timeout 10m`,
		"gantry rollout undo": `  # Back to the previous revision, or to a given one
  gantry rollout undo web
  gantry rollout undo web --to-revision 2`,
		"gantry scale": `  # Run five replicas of a service (no restart)
  gantry scale service web --replicas 5`,
		"gantry trace": `  # Keep a day of demand for the dashboard's Simulate page, then list the kept traces
  gantry trace put black-friday ./black-friday.csv
  gantry trace list`,
		"gantry trace put": `  # A CSV of time,service,replicas (docs/simulate.md), checked against the stored services
  gantry trace put black-friday ./black-friday.csv`,
		"gantry trace list": `  # Every kept trace: rows, services, span and size
  gantry trace list`,
		"gantry trace delete": `  # Delete a kept trace
  gantry trace delete black-friday`,
		"gantry secret": `  # A Secret from a file, then its keys (never its values)
  gantry secret create db --from-file password=./db-password
  gantry secret list`,
		"gantry secret create": `  # Values from files (kept off your shell's history)
  gantry secret create db --from-file password=./db-password --from-file user=./db-user`,
		"gantry secret delete": `  # Delete a Secret no service uses
  gantry secret delete db`,
		"gantry secret list": `  # Every Secret with its keys and revision
  gantry secret list`,
		"gantry server": `  # A server on PostgreSQL, one of several sharing it
  gantry server --store postgres://gantry@db/gantry --listen 0.0.0.0:7400 --data-dir /var/lib/gantry`,
		"gantry token": `  # A read-only token for a dashboard user
  gantry token create --kind read-only --description "on-call"`,
		"gantry token create": `  # An admin token that lasts a day
  gantry token create --kind admin --ttl 24h`,
		"gantry token list": `  # Every token (never its secret)
  gantry token list`,
		"gantry token revoke": `  # Refuse a token at once on every server
  gantry token revoke tok-1a2b3c`,
		"gantry top": `  # CPU and memory each machine's replicas use now
  gantry top machines

  # Per replica, of one service
  gantry top replicas -l app=web`,
		"gantry validate": `  # Check a spec offline: fields, units, references
  gantry validate -f web.yaml`,
		"gantry version": `  # This CLI's version and the server's
  gantry version`,
	}
}

// attachExamples sets each command's Examples section from examples().
func attachExamples(root *cobra.Command) {
	all := examples()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if ex, ok := all[c.CommandPath()]; ok {
			c.Example = ex
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
