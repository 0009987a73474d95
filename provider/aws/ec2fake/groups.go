package ec2fake

import (
	"encoding/xml"
	"fmt"
	"net/url"
	"sort"
	"strconv"
)

// Security groups and subnets, for the calls the aws provider makes to
// open the overlay's WireGuard port between a cluster's machines:
// DescribeSubnets, CreateSecurityGroup, AuthorizeSecurityGroupIngress,
// DescribeSecurityGroups and DeleteSecurityGroup. As EC2 does, group names
// are unique per VPC, and a group still on an instance that is not
// terminated cannot be deleted (DependencyViolation).

// DefaultVPC is the VPC of groups created without a VpcId.
const DefaultVPC = "vpc-default"

type group struct {
	ID, Name, Description, VPC string
	Tags                       map[string]string
	Rules                      []Rule
}

// Rule is one ingress permission.
type Rule struct {
	Protocol         string
	FromPort, ToPort int
	// Groups are the source security groups.
	Groups []string
}

// Group is what a test may check of a security group.
type Group struct {
	ID, Name, VPC string
	Tags          map[string]string
	Rules         []Rule
}

// AddSubnet declares a subnet of vpc in zone (DescribeSubnets finds it).
func (s *Server) AddSubnet(id, vpc, zone string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subnets == nil {
		s.subnets = map[string][2]string{}
	}
	s.subnets[id] = [2]string{vpc, zone}
}

// Groups lists the security groups, by id.
func (s *Server) Groups() []Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Group, 0, len(s.groups))
	for _, g := range s.groups {
		out = append(out, Group{ID: g.ID, Name: g.Name, VPC: g.VPC, Tags: g.Tags, Rules: g.Rules})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *Server) describeSubnets(form url.Values) (any, *apiError) {
	out := subnetsResponse{RequestID: "req-fake"}
	for _, id := range indexed(form, "SubnetId") {
		sn, ok := s.subnets[id]
		if !ok {
			return nil, &apiError{400, "InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", id)}
		}
		out.Subnets = append(out.Subnets, subnetXML{ID: id, VPC: sn[0], Zone: sn[1]})
	}
	return out, nil
}

func (s *Server) createSecurityGroup(form url.Values) (any, *apiError) {
	name, vpc := form.Get("GroupName"), form.Get("VpcId")
	if name == "" || form.Get("GroupDescription") == "" {
		return nil, &apiError{400, "MissingParameter", "The request must contain the parameters GroupName and GroupDescription"}
	}
	if vpc == "" {
		vpc = DefaultVPC
	}
	for _, g := range s.groups {
		if g.Name == name && g.VPC == vpc {
			return nil, &apiError{400, "InvalidGroup.Duplicate", fmt.Sprintf("The security group '%s' already exists for VPC '%s'", name, vpc)}
		}
	}
	s.seq++
	g := &group{ID: fmt.Sprintf("sg-%017x", 0x5e0000+s.seq), Name: name, Description: form.Get("GroupDescription"), VPC: vpc, Tags: map[string]string{}}
	for i := 1; form.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i)) != ""; i++ {
		for j := 1; ; j++ {
			k := form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j))
			if k == "" {
				break
			}
			g.Tags[k] = form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Value", i, j))
		}
	}
	if s.groups == nil {
		s.groups = map[string]*group{}
	}
	s.groups[g.ID] = g
	return createGroupResponse{RequestID: "req-fake", GroupID: g.ID}, nil
}

func (s *Server) authorizeIngress(form url.Values) (any, *apiError) {
	g, ok := s.groups[form.Get("GroupId")]
	if !ok {
		return nil, &apiError{400, "InvalidGroup.NotFound", fmt.Sprintf("The security group '%s' does not exist", form.Get("GroupId"))}
	}
	for i := 1; form.Get(fmt.Sprintf("IpPermissions.%d.IpProtocol", i)) != ""; i++ {
		p := fmt.Sprintf("IpPermissions.%d.", i)
		from, _ := strconv.Atoi(form.Get(p + "FromPort"))
		to, _ := strconv.Atoi(form.Get(p + "ToPort"))
		rule := Rule{Protocol: form.Get(p + "IpProtocol"), FromPort: from, ToPort: to}
		for j := 1; form.Get(fmt.Sprintf("%sGroups.%d.GroupId", p, j)) != ""; j++ {
			src := form.Get(fmt.Sprintf("%sGroups.%d.GroupId", p, j))
			if _, ok := s.groups[src]; !ok {
				return nil, &apiError{400, "InvalidGroup.NotFound", fmt.Sprintf("The security group '%s' does not exist", src)}
			}
			rule.Groups = append(rule.Groups, src)
		}
		for _, have := range g.Rules {
			if have.Protocol == rule.Protocol && have.FromPort == rule.FromPort && have.ToPort == rule.ToPort && fmt.Sprint(have.Groups) == fmt.Sprint(rule.Groups) {
				return nil, &apiError{400, "InvalidPermission.Duplicate", "the specified rule already exists"}
			}
		}
		g.Rules = append(g.Rules, rule)
	}
	return returnResponse{XMLName: xml.Name{Local: "AuthorizeSecurityGroupIngressResponse"}, RequestID: "req-fake", Return: true}, nil
}

func (s *Server) describeSecurityGroups(form url.Values) (any, *apiError) {
	ids := indexed(form, "GroupId")
	filters := map[string][]string{}
	for i := 1; form.Get(fmt.Sprintf("Filter.%d.Name", i)) != ""; i++ {
		filters[form.Get(fmt.Sprintf("Filter.%d.Name", i))] = indexed(form, fmt.Sprintf("Filter.%d.Value", i))
	}
	out := groupsResponse{RequestID: "req-fake"}
	for _, g := range s.sortedGroups() {
		if (len(ids) == 0 || contains(ids, g.ID)) && matchesFilters(filters, g.Tags, map[string]string{"group-name": g.Name, "vpc-id": g.VPC}) {
			out.Groups = append(out.Groups, g.xml())
		}
	}
	for _, id := range ids {
		if _, ok := s.groups[id]; !ok {
			return nil, &apiError{400, "InvalidGroup.NotFound", fmt.Sprintf("The security group '%s' does not exist", id)}
		}
	}
	return out, nil
}

func (s *Server) deleteSecurityGroup(form url.Values) (any, *apiError) {
	id := form.Get("GroupId")
	if _, ok := s.groups[id]; !ok {
		return nil, &apiError{400, "InvalidGroup.NotFound", fmt.Sprintf("The security group '%s' does not exist", id)}
	}
	for _, in := range s.instances {
		if in.State != "terminated" && contains(in.SecurityGroups, id) {
			return nil, &apiError{400, "DependencyViolation", fmt.Sprintf("resource %s has a dependent object", id)}
		}
	}
	for _, g := range s.groups {
		for _, r := range g.Rules {
			if g.ID != id && contains(r.Groups, id) {
				return nil, &apiError{400, "DependencyViolation", fmt.Sprintf("resource %s has a dependent object", id)}
			}
		}
	}
	delete(s.groups, id)
	return returnResponse{XMLName: xml.Name{Local: "DeleteSecurityGroupResponse"}, RequestID: "req-fake", Return: true}, nil
}

func (s *Server) sortedGroups() []*group {
	out := make([]*group, 0, len(s.groups))
	for _, g := range s.groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (g *group) xml() groupXML {
	x := groupXML{Owner: "123456789012", ID: g.ID, Name: g.Name, Description: g.Description, VPC: g.VPC}
	for _, r := range g.Rules {
		p := permissionXML{Protocol: r.Protocol, FromPort: r.FromPort, ToPort: r.ToPort}
		for _, src := range r.Groups {
			p.Groups = append(p.Groups, pairXML{GroupID: src, UserID: "123456789012"})
		}
		x.Permissions = append(x.Permissions, p)
	}
	x.Tags = tagsXML(g.Tags)
	return x
}

type subnetXML struct {
	ID   string `xml:"subnetId"`
	VPC  string `xml:"vpcId"`
	Zone string `xml:"availabilityZone"`
}

type subnetsResponse struct {
	XMLName   xml.Name    `xml:"DescribeSubnetsResponse"`
	RequestID string      `xml:"requestId"`
	Subnets   []subnetXML `xml:"subnetSet>item"`
}

type createGroupResponse struct {
	XMLName   xml.Name `xml:"CreateSecurityGroupResponse"`
	RequestID string   `xml:"requestId"`
	GroupID   string   `xml:"groupId"`
}

type returnResponse struct {
	XMLName   xml.Name
	RequestID string `xml:"requestId"`
	Return    bool   `xml:"return"`
}

type pairXML struct {
	GroupID string `xml:"groupId"`
	UserID  string `xml:"userId"`
}

type permissionXML struct {
	Protocol string    `xml:"ipProtocol"`
	FromPort int       `xml:"fromPort"`
	ToPort   int       `xml:"toPort"`
	Groups   []pairXML `xml:"groups>item"`
}

type groupXML struct {
	Owner       string          `xml:"ownerId"`
	ID          string          `xml:"groupId"`
	Name        string          `xml:"groupName"`
	Description string          `xml:"groupDescription"`
	VPC         string          `xml:"vpcId"`
	Permissions []permissionXML `xml:"ipPermissions>item"`
	Tags        []tagXML        `xml:"tagSet>item"`
}

type groupsResponse struct {
	XMLName   xml.Name   `xml:"DescribeSecurityGroupsResponse"`
	RequestID string     `xml:"requestId"`
	Groups    []groupXML `xml:"securityGroupInfo>item"`
}
