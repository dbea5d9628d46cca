// HasPrivilegeOnEntities as vCenter answers it, from the permissions set on the inventory.
//
// govmomi 0.24's simulator (simulator/authorization_manager.go) grants every privilege asked on
// every entity, whatever permissions were set. vCenter answers with the session user's effective
// privileges: those of the role of the permission that applies to the entity, the user's own on
// the entity itself or else the nearest one up the inventory that propagates (vSphere Security,
// "Hierarchical Inheritance of Permissions"; vSphere Web Services API, AuthorizationManager).
// Here the same walk runs over the permissions SetEntityPermissions set (RetrieveEntityPermissions),
// for the user of the session asked about. Modelled, not copied: group permissions are not
// resolved (the simulator knows no groups), and a user without any permission of its own keeps
// the simulator's answer, every privilege: its login is an administrator's.
package main

import (
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// systemPrivileges are in every role (AuthorizationManager: "For user-defined roles, the
// system-defined privileges System.Anonymous, System.View, and System.Read are always present").
var systemPrivileges = []string{"System.Anonymous", "System.View", "System.Read"}

// authorizationManager replaces the simulator's in the registry; embedded by value, as the
// property collector wants (dvs_hosts.go). Its permissions map is shared with the original.
type authorizationManager struct {
	simulator.AuthorizationManager
}

// rolePrivileges: role id -> its privileges (with the system ones), or nil when the role is unknown.
func (m *authorizationManager) rolePrivileges(id int32) map[string]bool {
	for _, role := range m.RoleList {
		if role.RoleId == id {
			granted := map[string]bool{}
			for _, p := range append(role.Privilege, systemPrivileges...) {
				granted[p] = true
			}
			if role.Name == "NoAccess" {
				return map[string]bool{}
			}
			return granted
		}
	}
	return nil
}

// effectiveRole: the role of the user's permission that applies to the entity; ok false when the
// user holds no permission of its own anywhere up the entity's inventory path. The simulator keeps
// permissions per entity (SetEntityPermissions stores them without their entity), so each entity
// on the path is asked with RetrieveEntityPermissions.
func (m *authorizationManager) effectiveRole(user string, entity types.ManagedObjectReference) (int32, bool) {
	ref := &entity
	for depth := 0; ref != nil && depth < 64; depth++ {
		obj, isEntity := simulator.Map.Get(*ref).(mo.Entity)
		if !isEntity {
			break
		}
		body := m.AuthorizationManager.RetrieveEntityPermissions(&types.RetrieveEntityPermissions{Entity: *ref})
		for _, p := range body.(*methods.RetrieveEntityPermissionsBody).Res.Returnval {
			if !p.Group && p.Principal == user && (depth == 0 || p.Propagate) {
				return p.RoleId, true
			}
		}
		ref = obj.Entity().Parent
	}
	return 0, false
}

func (m *authorizationManager) HasPrivilegeOnEntities(ctx *simulator.Context, req *types.HasPrivilegeOnEntities) soap.HasFault {
	user := ""
	if ctx.Session != nil && ctx.Session.Key == req.SessionId {
		user = ctx.Session.UserName
	}
	var result []types.EntityPrivilege
	for _, entity := range req.Entity {
		answer := types.EntityPrivilege{Entity: entity}
		var granted map[string]bool
		if role, ok := m.effectiveRole(user, entity); ok && user != "" {
			if granted = m.rolePrivileges(role); granted == nil {
				granted = map[string]bool{}
			}
		}
		for _, id := range req.PrivId {
			answer.PrivAvailability = append(answer.PrivAvailability, types.PrivilegeAvailability{
				PrivId:    id,
				IsGranted: granted == nil || granted[id],
			})
		}
		result = append(result, answer)
	}
	return &methods.HasPrivilegeOnEntitiesBody{Res: &types.HasPrivilegeOnEntitiesResponse{Returnval: result}}
}

// extendAuthorization puts the permission-aware AuthorizationManager in place of the simulator's.
func extendAuthorization() {
	content := simulator.Map.Get(vim25.ServiceInstance).(*simulator.ServiceInstance).Content
	inner, ok := simulator.Map.Get(*content.AuthorizationManager).(*simulator.AuthorizationManager)
	if !ok {
		return
	}
	simulator.Map.Put(&authorizationManager{AuthorizationManager: *inner})
}
