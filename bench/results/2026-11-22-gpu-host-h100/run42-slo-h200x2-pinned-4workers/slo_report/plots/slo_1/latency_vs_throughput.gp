set terminal pngcairo size 1100,650 noenhanced
set output 'latency_vs_throughput.png'
set title 'kaggle slo_1: latency vs throughput (one point per step)'
set datafile missing '?'
set xlabel 'achieved requests per second'
set ylabel 'latency (ms, log scale)'
set logscale y
set xrange [0:*]
set grid
set key top left
plot 'latency_vs_throughput.dat' using 1:5 with linespoints lw 2 pt 7 lc rgb '#d62728' title 'p99', 'latency_vs_throughput.dat' using 1:6 with linespoints pt 6 lc rgb '#9467bd' title 'p99.9', 'latency_vs_throughput.dat' using 1:4 with linespoints pt 5 lc rgb '#ff7f0e' title 'p90', 'latency_vs_throughput.dat' using 1:3 with linespoints lw 2 pt 7 lc rgb '#1f77b4' title 'p50', 5 with lines dt 3 lw 2 lc rgb 'black' title 'SLO: p99 <= 5 ms'
