# Builds a hash of N string keys, sorts them, rehashes them into a second hash with
# derived keys and values, deletes a third, and prints checksums. N is $ARGV[0].
use strict;
use warnings;

my $n = $ARGV[0];
my %h;
my $x = 12345;
for my $i (1 .. $n) {
    $x = ($x * 1103515245 + 12345) % 2147483648;
    $h{"key:" . $x . ":" . ($i % 977)} = [$i, "v" x (1 + $i % 13)];
}
my @sorted = sort keys %h;
my %r;
for my $k (@sorted) {
    my $v = $h{$k};
    $r{reverse($k) . length($v->[1])} = { id => $v->[0], len => length($v->[1]), key => $k };
}
undef %h;
my $deleted = 0;
for my $k (sort { $r{$a}{id} <=> $r{$b}{id} } keys %r) {
    if ($r{$k}{id} % 3 == 0) { delete $r{$k}; $deleted++; }
}
my $sum = 0;
my $len = 0;
while (my ($k, $v) = each %r) { $sum += $v->{id}; $len += length($k) + $v->{len}; }
print "keys ", scalar(@sorted), " first $sorted[0] last $sorted[-1]\n";
print "kept ", scalar(keys %r), " deleted $deleted sum $sum len $len\n";
