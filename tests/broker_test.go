package tests

import (
	"os/exec"
	"strings"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// brokerNamespace prefixes the exchange and queues of every black-box cluster.
const brokerNamespace = "keelson_bb_"

// namespaces are those this test process created: cleanBroker leaves other runs' queues alone.
var namespaces = struct {
	sync.Mutex
	used []string
}{}

// newNamespace returns a fresh exchange name and queue prefix for one cluster.
func newNamespace() string {
	ns := brokerNamespace + randomHex(5)
	namespaces.Lock()
	defer namespaces.Unlock()
	namespaces.used = append(namespaces.used, ns)
	return ns
}

func ownNamespace(name string) bool {
	namespaces.Lock()
	defer namespaces.Unlock()
	for _, ns := range namespaces.used {
		if name == ns || strings.HasPrefix(name, ns+".") {
			return true
		}
	}
	return false
}

// cleanBroker deletes the queues and exchanges this run's replicas declared on the shared broker.
// The names come from rabbitmqctl (the replicas' consumer names are theirs to choose); without it,
// nothing is done.
func cleanBroker() {
	ctl, err := exec.LookPath("rabbitmqctl")
	if err != nil {
		return
	}
	list := func(what string) []string {
		out, err := exec.Command(ctl, what, "name", "--silent").Output()
		if err != nil {
			return nil
		}
		var names []string
		for _, line := range strings.Split(string(out), "\n") {
			if name := strings.TrimSpace(line); ownNamespace(name) {
				names = append(names, name)
			}
		}
		return names
	}
	queues, exchanges := list("list_queues"), list("list_exchanges")
	if len(queues)+len(exchanges) == 0 {
		return
	}
	conn, err := amqp.Dial(brokerURL())
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	defer ch.Close()
	for _, q := range queues {
		_, _ = ch.QueueDelete(q, false, false, false)
	}
	for _, x := range exchanges {
		_ = ch.ExchangeDelete(x, false, false)
	}
}
