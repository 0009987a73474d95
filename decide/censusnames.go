package decide

import (
	"maps"
	"slices"
)

// censusNames number what the census's marks name: the groups, the
// provider templates and the provider keys. A mark is then a few numbers
// and flags with no pointer, and a census spliced in a pass copies its
// 10,000 marks without the collector's write barriers and leaves nothing
// in them for it to scan (five strings each were most of what a splice
// copied). A census and those made from it share the names; a new name
// is added to a copy, so that a number never changes what it names.
type censusNames struct {
	groups    []groupKey
	templates []providerTemplate
	keys      []string
	// groupAt, templateAt and keyAt number the names.
	groupAt    map[groupKey]int32
	templateAt map[providerTemplate]int32
	keyAt      map[string]int32
}

// censusMark is what the census counted of a machine: its group, its
// template (when counted toward the group; else noTemplate) and its
// provider key, by number in the census's names.
type censusMark struct {
	group, template, key int32
	flags                censusFlags
}

const noTemplate int32 = -1

// namedMark is a mark with what it names.
type namedMark struct {
	group    groupKey
	template providerTemplate
	key      string
	flags    censusFlags
}

// numbered is named's mark, with the names that number it: n, or a copy
// of n with what it lacked added.
func (n *censusNames) numbered(named namedMark) (censusMark, *censusNames) {
	mark := censusMark{template: noTemplate, flags: named.flags}
	own := false // n is a copy of the names handed
	if n == nil {
		n, own = n.copied(), true
	}
	add := func(at *int32, known func() (int32, bool), added func() int32) {
		if i, ok := known(); ok {
			*at = i
			return
		}
		if !own {
			n, own = n.copied(), true
		}
		*at = added()
	}
	add(&mark.group, func() (int32, bool) { i, ok := n.groupAt[named.group]; return i, ok }, func() int32 { return numberName(&n.groups, n.groupAt, named.group) })
	add(&mark.key, func() (int32, bool) { i, ok := n.keyAt[named.key]; return i, ok }, func() int32 { return numberName(&n.keys, n.keyAt, named.key) })
	if named.flags&markCounted != 0 {
		add(&mark.template, func() (int32, bool) { i, ok := n.templateAt[named.template]; return i, ok },
			func() int32 { return numberName(&n.templates, n.templateAt, named.template) })
	}
	return mark, n
}

// numberName adds name to names, numbered by at.
func numberName[K comparable](names *[]K, at map[K]int32, name K) int32 {
	i := int32(len(*names))
	*names, at[name] = append(*names, name), i
	return i
}

// copied is a copy of n to add names to (nil: empty names).
func (n *censusNames) copied() *censusNames {
	if n == nil {
		return &censusNames{groupAt: map[groupKey]int32{}, templateAt: map[providerTemplate]int32{}, keyAt: map[string]int32{}}
	}
	return &censusNames{groups: slices.Clone(n.groups), templates: slices.Clone(n.templates), keys: slices.Clone(n.keys),
		groupAt: maps.Clone(n.groupAt), templateAt: maps.Clone(n.templateAt), keyAt: maps.Clone(n.keyAt)}
}

// named is what mark names.
func (n *censusNames) named(mark censusMark) namedMark {
	named := namedMark{group: n.groups[mark.group], key: n.keys[mark.key], flags: mark.flags}
	if mark.template != noTemplate {
		named.template = n.templates[mark.template]
	}
	return named
}

// censusRead is what a census counted, its marks by what they name: two
// censuses of the same machines read alike whatever their names' numbers.
type censusRead struct {
	Census *fleetCensus
	Marks  []namedMark
}

func (c *fleetCensus) read() censusRead {
	if c == nil {
		return censusRead{}
	}
	counts := *c
	counts.names, counts.marks = nil, nil
	out := censusRead{Census: &counts}
	if c.marks != nil {
		out.Marks = make([]namedMark, len(c.marks))
		for i, m := range c.marks {
			out.Marks[i] = c.names.named(m)
		}
	}
	return out
}

// lastMark is the last mark numbered in a count: the machines of a group
// mostly follow each other, with the same names, which are numbered
// again only when they change.
type lastMark struct {
	named namedMark
	mark  censusMark
	set   bool
}

// again is named's mark when it names what the last did (false: number
// it).
func (l *lastMark) again(named namedMark) (censusMark, bool) {
	counted := named.flags&markCounted != 0
	if !l.set || l.named.group != named.group || l.named.key != named.key || counted && (l.mark.template == noTemplate || l.named.template != named.template) {
		return censusMark{}, false
	}
	mark := censusMark{group: l.mark.group, key: l.mark.key, template: noTemplate, flags: named.flags}
	if counted {
		mark.template = l.mark.template
	}
	return mark, true
}
