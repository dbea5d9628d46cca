// SOAP answers for the VM rules of vm.go: a failed Task carrying vCenter's fault, or a SOAP fault,
// written the way the simulator's own handler writes its responses.
package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// failedTask makes a Task that failed with the refusal, as vCenter reports a refused operation.
func failedTask(obj mo.Reference, name string, refusal *vmRefusal) types.ManagedObjectReference {
	task := simulator.CreateTask(obj, name, func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		return nil, refusal.fault
	})
	ref := task.Run()
	simulator.Map.Update(task, []types.PropertyChange{{
		Name: "info.error",
		Val:  types.LocalizedMethodFault{Fault: refusal.fault, LocalizedMessage: refusal.msg},
	}})
	return ref
}

const envelopeOpen = `<?xml version="1.0" encoding="UTF-8"?>` +
	`<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" ` +
	`xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" ` +
	`xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">` +
	`<soapenv:Body>`

const envelopeClose = `</soapenv:Body></soapenv:Envelope>`

func taskResponse(w http.ResponseWriter, method string, task types.ManagedObjectReference) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, `%s<%sResponse xmlns="urn:vim25"><returnval type="Task">%s</returnval></%sResponse>%s`,
		envelopeOpen, method, xmlText(task.Value), method, envelopeClose)
}

func soapFault(w http.ResponseWriter, fault, msg string) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprintf(w, `%s<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>%s</faultstring>`+
		`<detail><%sFault xmlns="urn:vim25" xsi:type="%s"></%sFault></detail></soapenv:Fault>%s`,
		envelopeOpen, xmlText(msg), fault, fault, fault, envelopeClose)
}

func xmlText(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
