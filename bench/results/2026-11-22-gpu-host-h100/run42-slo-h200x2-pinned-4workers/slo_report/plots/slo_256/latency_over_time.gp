set terminal pngcairo size 1100,650 noenhanced
set output 'latency_over_time.png'
set title 'kaggle slo_256: latency over time (per interval, by completion)'
set datafile missing '?'
set xlabel 'time since the first step started (s)'
set ylabel 'latency (ms, log scale)'
set logscale y
set ytics nomirror
set y2label 'answers per second'
set y2tics
set y2range [0:*]
set grid
set key outside bottom center horizontal
plot 'latency_over_time.dat' using 1:5 with lines lw 2 lc rgb '#d62728' title 'p99', 'latency_over_time.dat' using 1:4 with lines lw 2 lc rgb '#1f77b4' title 'p50', 'latency_over_time.dat' using 1:6 with lines dt 2 lc rgb '#7f7f7f' title 'max', 'latency_over_time.dat' using 1:3 axes x1y2 with lines lc rgb '#2ca02c' title 'answers/s'
