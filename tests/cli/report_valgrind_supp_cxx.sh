#!/bin/sh
# Valgrind blocks name C++ functions by their mangled names, the
# allocator too (cxxfix: Widget::Widget() 48 bytes, ns::Pool<int>::grow
# 40, Widget::operator+= 24, Widget::operator&= 16, each called by main):
#   {pool}  _Znwm, _ZN2ns4PoolIiE4growEm: grow (its DWARF linkage name)
#   {ctor}  _Znwm, _ZN6WidgetC1Ev: the constructor, whose debug info says
#       C2 (the C1 symbol at its address is an alias)
#   {demangled}  operator new(unsigned long), Widget::operator+=(int):
#       written demangled, by hand
#   {new_any}  operator new*, _ZN6Widget*: what is left, operator&=
# the allocator frame is either operator: the fixture's blocks came from
# malloc, which heaptrail's stack does not tell apart.
. tests/cli/case.lib
supp=$logdir/report_valgrind_supp_cxx.supp
cat >"$supp" <<'SUPP'
{
   pool
   Memcheck:Leak
   fun:_Znwm
   fun:_ZN2ns4PoolIiE4growEm
   fun:main
}
{
   ctor
   Memcheck:Leak
   fun:_Znwm
   fun:_ZN6WidgetC1Ev
}
{
   demangled
   Memcheck:Leak
   fun:operator new(unsigned long)
   fun:Widget::operator+=(int)
}
{
   new_any
   Memcheck:Leak
   fun:operator new*
   fun:_ZN6Widget*
}
SUPP
run "$HTDRIVE" report --suppressions "$supp" $ADIR/cxxfix.fix
compare
