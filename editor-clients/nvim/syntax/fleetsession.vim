" The session buffer (fleet://session/<id>, lua/fleet/tree.lua): Turn headers, agent states,
" cells (code after │, output after →, a failed cell's error or traceback after ✗), outcomes,
" answers, errors, artifacts and trace links. Display only.
if exists('b:current_syntax')
  finish
endif
scriptencoding utf-8

syn match fleetsessionTitle /\%1l^Fleet session \S*/
syn match fleetsessionHint /\%1l(g? for help)/
syn match fleetsessionTurnLine /^Turn .*$/ contains=fleetsessionTurn,fleetsessionState,fleetsessionMeta
syn match fleetsessionTurn /^Turn \S\+/ contained
syn match fleetsessionMeta /\%(route \S\+\|model calls \d\+\/\d\+\|· .*$\)/ contained
syn match fleetsessionAgentLine /^\s*▾ .*$/ contains=fleetsessionAgent,fleetsessionState
syn match fleetsessionAgent /^\s*▾ \S\+/ contained nextgroup=fleetsessionState skipwhite
syn match fleetsessionCellLine /^\s*\[cell \d\+\] .*$/
      \ contains=fleetsessionCell,fleetsessionOk,fleetsessionBad,fleetsessionBusy,fleetsessionFailed
syn match fleetsessionCell /^\s*\[cell \d\+\]/ contained
syn match fleetsessionState /\[[a-z_ ]\+\]/ contained
      \ contains=fleetsessionOk,fleetsessionBad,fleetsessionBusy,fleetsessionPartial
syn match fleetsessionOk /completed\|succeeded\|submitted/ contained
" after fleetsessionOk: at the same column the last match defined wins
syn match fleetsessionPartial /completed with errors/ contained
syn match fleetsessionBad /failed\|cancelled\|timeout\|error/ contained
syn match fleetsessionBusy /running/ contained
syn match fleetsessionFailed /✗ .*$/ contained
syn match fleetsessionCode /^\s*│ .*$/ contains=fleetsessionBar
syn match fleetsessionBar /│/ contained
syn match fleetsessionOutput /^\s*→ .*$/ contains=fleetsessionArrow
syn match fleetsessionArrow /→/ contained
" a failed cell's output: its error, a traceback (never the green of normal output)
syn match fleetsessionTraceback /^\s*✗ .*$/ contains=fleetsessionCross
syn match fleetsessionCross /✗/ contained
syn match fleetsessionProblem /^\s*! .*$/
syn match fleetsessionStored /^  (a stored Turn: .*)$/
syn match fleetsessionLabel /^\%(Task\|Triage\|Answer\|Artifact\|Trace\):/
syn match fleetsessionError /^Error: .*$/
syn match fleetsessionOutcome /^Outcome: .*$/
syn match fleetsessionUri /fleet:\/\S\+/
syn match fleetsessionRule /^─\+$/

hi def link fleetsessionTitle Title
hi def link fleetsessionTurn Title
hi def link fleetsessionMeta Comment
hi def link fleetsessionAgent Function
hi def link fleetsessionCell Number
hi def link fleetsessionState Delimiter
hi def link fleetsessionOk DiagnosticOk
hi def link fleetsessionBad DiagnosticError
hi def link fleetsessionBusy DiagnosticWarn
hi def link fleetsessionPartial DiagnosticWarn
hi def link fleetsessionFailed DiagnosticError
hi def link fleetsessionBar Comment
hi def link fleetsessionOutput String
hi def link fleetsessionArrow Comment
hi def link fleetsessionTraceback DiagnosticError
hi def link fleetsessionCross DiagnosticError
hi def link fleetsessionHint Comment
hi def link fleetsessionStored Comment
hi def link fleetsessionProblem DiagnosticError
hi def link fleetsessionLabel Statement
hi def link fleetsessionError DiagnosticError
hi def link fleetsessionOutcome DiagnosticWarn
hi def link fleetsessionUri Underlined
hi def link fleetsessionRule Comment

let b:current_syntax = 'fleetsession'
