#!/usr/bin/env python3
"""Opens N idle connections from 127.0.0.2 to each of a coordinator's ports (gRPC 17400,
HTTP 17401) and reports the coordinator process's RSS and open descriptors before, under
and after the flood, whether /healthz and `akbench run list` answer under it, and how many
connections the server closed. Usage (issue 49, docs/performance-notebook.md "A flood of idle
connections"):

    akbench up --workers 1 --data-dir /tmp/net-up/pg --grpc-listen 127.0.0.1:17400 \
        --http-listen 127.0.0.1:17401 ... & echo $! > /tmp/net-up/pid
    ulimit -n 20000; python3 bench/connection_flood.py 9800
"""
import socket, sys, time, subprocess, os
pid = int(open('/tmp/net-up/pid').read())
def rss(p):
    for l in open(f'/proc/{p}/status'):
        if l.startswith('VmRSS'): return l.split()[1]+' kB'
def fds(p): return len(os.listdir(f'/proc/{p}/fd'))
# the coordinator may be in the akbench process itself
print('before: rss', rss(pid), 'fds', fds(pid), flush=True)
socks=[]
n=int(sys.argv[1])
t=time.time()
for i in range(n):
    for port in (17400,17401):
        s=socket.socket(); s.bind(('127.0.0.2',0))
        try:
            s.connect(('127.0.0.1',port)); socks.append(s)
        except OSError as e:
            print('connect failed', e); break
print(f'opened {len(socks)} in {time.time()-t:.1f}s', flush=True)
time.sleep(1)
print('flood: rss', rss(pid), 'fds', fds(pid), flush=True)
h=subprocess.run(['curl','-s','-m','10','http://127.0.0.1:17401/healthz'],capture_output=True,text=True)
print('healthz under flood:', repr(h.stdout))
r=subprocess.run([os.environ.get('AKBENCH', 'akbench'),'--coordinator','http://127.0.0.1:17400','run','list'],capture_output=True,text=True)
print('run list under flood: exit', r.returncode, (r.stdout+r.stderr)[:200].replace('\n',' | '))
time.sleep(14)
print('after 15 s (handshake timeout 10 s): rss', rss(pid), 'fds', fds(pid), flush=True)
closed=0
for s in socks:
    s.setblocking(False)
    try:
        d=s.recv(100)
        if d==b'' : closed+=1
        elif d.startswith(b'HTTP/1.1 503'): closed+=1
    except BlockingIOError: pass
    except OSError: closed+=1
print(f'closed by the server: {closed} of {len(socks)}')
for s in socks: s.close()
time.sleep(3)
print('flood gone: rss', rss(pid), 'fds', fds(pid), flush=True)
